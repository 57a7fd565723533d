// ArrayRef: how an array crosses from Python into C++. tessera/_arrays.py builds one from a numpy array
// or a torch CPU tensor (data pointer as an integer, dtype name, shape, strides in elements), so the
// bindings never depend on numpy's or torch's C APIs; the caller keeps the array alive for the call.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::python {

struct ArrayRef {
  uintptr_t ptr = 0;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape, strides;  // strides in elements, like TensorView
};

// Throws Error(kInvalidArgument) naming `arg` when shape and strides disagree or there are too many dims.
TensorView to_view(const ArrayRef& ref, const char* fn, const char* arg);

void bind_array_ref(nanobind::module_& m);

}  // namespace tessera::python
