// machine_limits(): the in-memory copy, the per-key cache file, and re-measurement on demand.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "tessera/core/cpu.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"
#include "tessera/info.h"

#ifndef TESSERA_VERSION_STRING
#error "TESSERA_VERSION_STRING must be defined by the build (src/CMakeLists.txt)"
#endif

namespace tessera {
namespace {

struct Key {
  std::string cpu_model;
  int logical_cpus, threads;
  std::string version;
  std::string isa;
  std::string text() const {
    return cpu_model + "|" + std::to_string(logical_cpus) + "|" + std::to_string(threads) + "|" + version + "|" + isa;
  }
  bool matches(const MachineLimits& m) const {
    return m.cpu_model == cpu_model && m.logical_cpus == logical_cpus && m.threads == threads && m.version == version &&
           m.isa == isa;
  }
};

Key current_key() {
  const CpuFeatures& f = cpu_features();
  return Key{f.model_name.empty() ? std::string("unknown") : f.model_name, f.logical_cpus, num_threads(),
             tessera_version(), isa_name(active_isa())};
}

std::string cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/tessera";
  const char* home = std::getenv("HOME");
  if (home && home[0] == '/') return std::string(home) + "/.cache/tessera";
  return "";
}

// FNV-1a: a short, stable file name per key (the key itself is stored inside and checked on load).
std::string cache_file_for(const Key& key) {
  const std::string dir = cache_dir();
  if (dir.empty()) return "";
  uint64_t h = 1469598103934665603ull;
  for (const char c : key.text()) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  char name[64];
  std::snprintf(name, sizeof name, "/machine_limits_%016llx.json", static_cast<unsigned long long>(h));
  return dir + name;
}

bool load(const Key& key, MachineLimits* out) {
  const std::string path = cache_file_for(key);
  if (path.empty()) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  MachineLimits m;
  if (!machine_limits_from_json(text.str(), &m) || !key.matches(m)) return false;
  m.from_cache = true;
  m.cache_file = path;
  *out = m;
  return true;
}

// Writes a temporary file and renames it into place, so concurrent readers never see half a file.
// Returns false (and leaves no file) when the folder is not writable.
bool store(const std::string& path, const MachineLimits& m) {
  if (path.empty()) return false;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << machine_limits_to_json(m) << "\n";
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::mutex g_mutex;
MachineLimits g_limits;
bool g_valid = false;

}  // namespace

const char* tessera_version() {
  return TESSERA_VERSION_STRING;
}

std::string machine_limits_cache_file() {
  return cache_file_for(current_key());
}

bool load_cached_machine_limits(MachineLimits* out) {
  return load(current_key(), out);
}

const MachineLimits& machine_limits(bool refresh) {
  TESSERA_CHECK(!in_parallel_region(),
                "machine_limits: must not be called inside a parallel region (it runs on every pool thread)");
  std::lock_guard<std::mutex> lock(g_mutex);
  const Key key = current_key();
  if (!refresh && g_valid && key.matches(g_limits)) return g_limits;
  // A cached measurement that looks disturbed (see machine_limits_warnings) is not trusted.
  MachineLimits m;
  if (refresh || !load(key, &m) || !machine_limits_warnings(m).empty()) {
    m = measure_machine_limits();
    const std::string path = cache_file_for(key);
    m.cache_file = store(path, m) ? path : "";
  }
  g_limits = m;
  g_valid = true;
  return g_limits;
}

}  // namespace tessera
