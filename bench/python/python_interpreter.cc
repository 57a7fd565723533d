#include "python/python_interpreter.h"

#include <unistd.h>

#include <cstdlib>

namespace tessera::bench {

std::string python_interpreter() {
  if (const char* env = std::getenv("TESSERA_PYTHON"); env && *env) return env;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    const std::string exe(self, size_t(n));
    const std::string dir = exe.substr(0, exe.rfind('/'));
    for (const char* name : {"/python3", "/python"}) {
      const std::string candidate = dir + name;
      if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "python3";
}

}  // namespace tessera::bench
