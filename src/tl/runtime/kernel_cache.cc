// The on-disk kernel cache (see kernel_cache.h).
#include "tl/runtime/kernel_cache.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tessera/core/error.h"
#include "tl/runtime/embedded_headers.h"

namespace tessera::tl {
namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t fnv1a(const std::string& data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char ch : data) {
    h ^= ch;
    h *= 0x100000001B3ull;
  }
  return h;
}

std::string temp_name(const std::string& dir, const std::string& tag) {
  static std::atomic<uint64_t> counter{0};
  return dir + "/.tmp-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

}  // namespace

void make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir))
    fail(ErrorCode::kRuntime, "tl: cannot create the folder ", dir, ": ", ec.message());
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  if (!f) fail(ErrorCode::kRuntime, "tl: cannot write ", path, ": ", std::strerror(errno));
}

void remove_tree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

std::string default_kernel_cache_dir() {
  std::string dir;
  if (const char* v = std::getenv("TESSERA_TL_CACHE"); v && *v) {
    dir = v;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/tessera/tl";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/tessera/tl";
  } else {
    dir = "/tmp/tessera-tl-" + std::to_string(::getuid());
  }
  make_dirs(dir);
  return dir;
}

std::string hash_hex(const std::string& data) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)fnv1a(data, 0xCBF29CE484222325ull),
                (unsigned long long)fnv1a(data, 0x84222325CBF29CE4ull));
  return buf;
}

const std::string& runtime_headers_hash() {
  static const std::string h = [] {
    std::string all;
    for (const EmbeddedFile& f : embedded_runtime_headers()) all += std::string(f.path) + "\n" + f.text + "\n";
    return hash_hex(all);
  }();
  return h;
}

std::string runtime_include_dir(const std::string& dir) {
  const std::string root = dir + "/include/" + runtime_headers_hash();
  if (exists(root + "/.complete")) return root;
  make_dirs(dir + "/include");
  const std::string tmp = temp_name(dir + "/include", "headers");
  for (const EmbeddedFile& f : embedded_runtime_headers()) {
    const std::string path = tmp + "/" + f.path;
    make_dirs(path.substr(0, path.rfind('/')));
    write_file(path, f.text);
  }
  write_file(tmp + "/.complete", "");
  if (::rename(tmp.c_str(), root.c_str()) != 0) remove_tree(tmp);  // another process published it first
  if (!exists(root + "/.complete")) fail(ErrorCode::kRuntime, "tl: cannot publish the runtime headers in ", root);
  return root;
}

std::string cached_library(const std::string& dir, const std::string& key, const std::string& source,
                           const std::function<void(const std::string&, const std::string&)>& build, bool* hit) {
  const std::string kernels = dir + "/kernels", final_dir = kernels + "/" + key, lib = final_dir + "/kernel.so";
  if (exists(lib)) {
    *hit = true;
    return lib;
  }
  *hit = false;
  make_dirs(kernels);
  const std::string tmp = temp_name(kernels, key.substr(0, 8));
  make_dirs(tmp);
  try {
    write_file(tmp + "/kernel.cc", source);
    build(tmp + "/kernel.cc", tmp + "/kernel.so");
  } catch (...) {
    throw;  // the folder stays, with the source the compiler rejected, for the bug report
  }
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) remove_tree(tmp);  // a concurrent build won; use it
  if (!exists(lib)) fail(ErrorCode::kRuntime, "tl: cannot publish the compiled kernel in ", final_dir);
  return lib;
}

}  // namespace tessera::tl
