// Helpers shared by the ep bindings (bind_ep.cc: groups, events, ElasticBuffer; bind_ep_legacy.cc:
// Buffer). Arrays come in as optional ArrayRef (tessera/_arrays.py) and go out as ep::OwnedTensor
// objects that tessera/deep_ep/_native.py turns into numpy arrays sharing their memory.
#pragma once

#include <nanobind/nanobind.h>

#include "array_ref.h"
#include "tessera/ep.h"

namespace tessera::python {

inline TensorView optional_view(const ArrayRef* ref, const char* fn, const char* arg) {
  return ref ? to_view(*ref, fn, arg) : TensorView();
}

// An OwnedTensor for Python, or None when undefined.
inline nanobind::object tensor_or_none(const ep::OwnedTensor& t) {
  return t.defined() || t.view.data ? nanobind::cast(t) : nanobind::none();
}

void bind_ep_legacy(nanobind::module_& m);

}  // namespace tessera::python
