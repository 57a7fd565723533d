// Maps tessera::Error codes to the exception classes defined in tessera/_errors.py:
//   kInvalidArgument -> InvalidArgumentError (a ValueError and a RuntimeError: DeepGEMM raises
//                       RuntimeError for failed preconditions, Python code expects ValueError)
//   kNotImplemented  -> NotImplementedInTessera (a NotImplementedError)
//   kRuntime         -> TesseraRuntimeError (a RuntimeError)
// The message text is passed through unchanged.
#include <exception>

#include "bindings.h"
#include "tessera/core/error.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

const char* class_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "InvalidArgumentError";
    case ErrorCode::kNotImplemented:
      return "NotImplementedInTessera";
    case ErrorCode::kRuntime:
      return "TesseraRuntimeError";
  }
  return "TesseraRuntimeError";
}

void raise_as_python(const Error& e) {
  try {
    nb::object cls = nb::module_::import_("tessera._errors").attr(class_name(e.code()));
    PyErr_SetString(cls.ptr(), e.what());
  } catch (const nb::python_error&) {
    // tessera._errors is missing (a broken install): still raise, as a plain RuntimeError.
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace

void register_error_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_as_python(e);
    }
  });
}

}  // namespace tessera::python
