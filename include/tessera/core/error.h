// tessera/core/error.h - the one exception family of tessera.
//
// Every failure that a caller can cause (bad shapes, dtypes, strides, scale layouts, unsupported
// combinations) throws tessera::Error. The message always names the argument and the rule that was
// violated, e.g. "bf16_gemm_nt: argument 'b' must have dtype bf16, got float8_e4m3fn".
// The Python layer maps codes to exception classes (see python/tessera/_errors.py).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

enum class ErrorCode {
  kInvalidArgument,  // the caller passed something that violates a documented rule
  kNotImplemented,   // a documented combination that this build does not provide (yet)
  kRuntime,          // the environment failed (allocation, compiler, timeout, peer died)
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Throws Error(code, concat(args...)). Marked cold so callers' fast paths stay small.
template <class... Args>
[[noreturn]] __attribute__((cold, noinline)) void fail(ErrorCode code, const Args&... args) {
  throw Error(code, detail::concat(args...));
}

}  // namespace tessera

// TESSERA_CHECK(cond, "function: argument 'x' must ...", extra...) throws kInvalidArgument.
#define TESSERA_CHECK(cond, ...)                                                                            \
  do {                                                                                                      \
    if (__builtin_expect(!(cond), 0)) ::tessera::fail(::tessera::ErrorCode::kInvalidArgument, __VA_ARGS__); \
  } while (0)

#define TESSERA_NOT_IMPLEMENTED(...) \
  ::tessera::fail(::tessera::ErrorCode::kNotImplemented, "not implemented: ", __VA_ARGS__)
