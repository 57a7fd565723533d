// Environment variables, read one way everywhere (README.md lists every variable tessera reads).
#pragma once

#include <cstdint>

namespace tessera::env {

// Whether the variable is set to anything but "" or "0".
bool flag(const char* name);

// The variable as a whole number, or `fallback` when it is unset or empty. Text that is not a whole
// number in [lo, hi] throws Error(kInvalidArgument) naming the variable, its value and the range.
int64_t integer(const char* name, int64_t fallback, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);

}  // namespace tessera::env
