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

// Runs an ep call with the GIL released (it waits for other processes) and returns what it returns.
template <class Call>
auto without_gil(Call&& call) {
  nanobind::gil_scoped_release release;
  return call();
}

// ElasticBuffer.combine and Buffer.combine read the same arrays, in this order, and return the same triple.
template <class Args>
Args combine_args(const char* fn, const ArrayRef& x, const ArrayRef* topk_weights, const ArrayRef* bias0,
                  const ArrayRef* bias1, bool async) {
  Args a;
  a.x = to_view(x, fn, "x");
  a.topk_weights = optional_view(topk_weights, fn, "topk_weights");
  a.bias0 = optional_view(bias0, fn, "bias[0]");
  a.bias1 = optional_view(bias1, fn, "bias[1]");
  a.async = async;
  return a;
}

template <class Result>
nanobind::tuple combine_outputs(const Result& r) {
  return nanobind::make_tuple(nanobind::cast(r.combined_x), tensor_or_none(r.combined_topk_weights), r.event);
}

void bind_ep_legacy(nanobind::module_& m);

}  // namespace tessera::python
