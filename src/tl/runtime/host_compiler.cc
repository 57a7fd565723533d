// Running the host compiler (see host_compiler.h).
#include "tl/runtime/host_compiler.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "tessera/core/error.h"

namespace tessera::tl {
namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// Runs a shell command, returns its exit status and combined output.
int run(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  const int status = pclose(p);
  return status;
}

}  // namespace

const HostCompiler& host_compiler() {
  static std::once_flag once;
  static HostCompiler hc;
  std::call_once(once, [] {
    const char* env = std::getenv("TESSERA_TL_CXX");
    if (!env || !*env) env = std::getenv("CXX");
    hc.command = env && *env ? env : "g++";
    std::string out;
    if (run(quote(hc.command) + " --version", &out) == 0) hc.version = out.substr(0, out.find('\n'));
  });
  if (hc.version.empty())
    fail(ErrorCode::kRuntime, "tl: cannot run the host C++ compiler '", hc.command,
         "' (set TESSERA_TL_CXX or CXX to a g++ >= 12 or clang++ >= 16)");
  return hc;
}

std::vector<std::string> kernel_compile_flags(const Target& target, const CompileOptions& options) {
  std::vector<std::string> f = {"-std=c++20",
                                "-O3",
                                "-fPIC",
                                "-shared",
                                "-fvisibility=hidden",
                                "-fno-math-errno",
                                "-fno-trapping-math",
                                "-ffp-contract=off",
                                "-Wno-psabi"};
  f.insert(f.end(), target.isa_flags.begin(), target.isa_flags.end());
  f.insert(f.end(), options.extra_flags.begin(), options.extra_flags.end());
  return f;
}

void compile_shared_object(const std::string& src_path, const std::string& out_path, const std::string& include_dir,
                           const std::vector<std::string>& flags) {
  std::string cmd = quote(host_compiler().command);
  for (const std::string& f : flags) cmd += " " + quote(f);
  cmd += " -I" + quote(include_dir) + " " + quote(src_path) + " -o " + quote(out_path);
  std::string output;
  const int status = run(cmd, &output);
  // GCC 12's loop vectoriser crashes (veclower2, "internal compiler error") on some generated kernels
  // under -mtune=haswell or znver3 (a SIMT kernel with per-thread carries, on a Zen 3 host): retry once
  // without it. The kernels' arithmetic is explicit vector code, and GCC vectorises no floating-point
  // reduction without -ffast-math, so the retry gives the same bits.
  if (status != 0 && output.find("internal compiler error") != std::string::npos) {
    std::string retry_output;
    if (run(cmd + " -fno-tree-loop-vectorize", &retry_output) == 0) return;
    output += "\n(retried with -fno-tree-loop-vectorize: failed too)\n" + retry_output;
  }
  if (status != 0)
    fail(ErrorCode::kRuntime, "tl: the host compiler failed (status ", status, ") on ", src_path, "\ncommand: ", cmd,
         "\n", output.substr(0, 8000));
}

}  // namespace tessera::tl
