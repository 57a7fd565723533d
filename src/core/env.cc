#include "core/env.h"

#include <cerrno>
#include <cstdlib>

#include "tessera/core/error.h"

namespace tessera::env {

bool flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && !(v[0] == '0' && v[1] == '\0');
}

int64_t integer(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  TESSERA_CHECK(end != v && *end == '\0' && errno == 0 && n >= lo && n <= hi, "environment variable ", name,
                " must be a whole number in [", lo, ", ", hi, "], got '", v, "'");
  return n;
}

}  // namespace tessera::env
