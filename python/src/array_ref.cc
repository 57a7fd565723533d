#include "array_ref.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

namespace nb = nanobind;

namespace tessera::python {

TensorView to_view(const ArrayRef& ref, const char* fn, const char* arg) {
  TESSERA_CHECK(ref.shape.size() == ref.strides.size(), fn, ": argument '", arg, "' has ", ref.shape.size(),
                " sizes but ", ref.strides.size(), " strides");
  TESSERA_CHECK(ref.shape.size() <= size_t(kMaxDims), fn, ": argument '", arg, "' has ", ref.shape.size(),
                " dimensions, at most ", kMaxDims, " are supported");
  TensorView v;
  v.data = reinterpret_cast<void*>(ref.ptr);
  v.dtype = ref.dtype;
  v.ndim = int(ref.shape.size());
  for (int d = 0; d < v.ndim; ++d) {
    TESSERA_CHECK(ref.shape[d] >= 0, fn, ": argument '", arg, "' has a negative size in dimension ", d);
    v.shape[d] = ref.shape[d];
    v.strides[d] = ref.strides[d];
  }
  return v;
}

void bind_array_ref(nb::module_& m) {
  nb::class_<ArrayRef>(m, "ArrayRef",
                       "A borrowed array: data pointer, dtype name, shape and strides in elements. Built by "
                       "tessera._arrays; the owner must stay alive while C++ uses it.")
      .def(
          "__init__",
          [](ArrayRef* self, uintptr_t ptr, const std::string& dtype, std::vector<int64_t> shape,
             std::vector<int64_t> strides) {
            new (self) ArrayRef{ptr, dtype_from_name(dtype), std::move(shape), std::move(strides)};
          },
          nb::arg("ptr"), nb::arg("dtype"), nb::arg("shape"), nb::arg("strides"))
      .def_ro("ptr", &ArrayRef::ptr)
      .def_prop_ro("dtype", [](const ArrayRef& r) { return std::string(dtype_name(r.dtype)); })
      .def_ro("shape", &ArrayRef::shape)
      .def_ro("strides", &ArrayRef::strides)
      .def("__repr__", [](const ArrayRef& r) {
        TensorView v = to_view(r, "ArrayRef", "self");
        return "ArrayRef(" + std::string(dtype_name(r.dtype)) + ", shape " + v.shape_str() + ", strides " +
               v.strides_str() + ")";
      });
}

}  // namespace tessera::python
