#include "tessera/core/error.h"

namespace tessera {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotImplemented:
      return "not implemented";
    case ErrorCode::kRuntime:
      return "runtime error";
  }
  return "error";
}

}  // namespace tessera
