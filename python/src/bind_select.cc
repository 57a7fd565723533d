// DeepSelect's top-k of tessera/select.h. The Python wrapper (tessera/deep_select) allocates the
// outputs and passes every option explicitly; the call runs without the GIL.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>

#include <optional>

#include "array_ref.h"
#include "bindings.h"
#include "tessera/select.h"

namespace nb = nanobind;

namespace tessera::python {

void bind_select(nb::module_& m) {
  m.def(
      "select_topk",
      [](const ArrayRef& input, int topk, const ArrayRef* begin, const ArrayRef* end, const ArrayRef* output_val,
         const ArrayRef& output_idx, const ArrayRef* output_idx_offset, bool sorted, bool sorted_index,
         int64_t idx_oob_fill_value, float value_oob_fill_value, bool abort_when_nan_found) {
        const char* fn = "topk";
        const TensorView in = to_view(input, fn, "input"), idx = to_view(output_idx, fn, "output_idx");
        TensorView b, e, val, off;
        if (begin) b = to_view(*begin, fn, "begin");
        if (end) e = to_view(*end, fn, "end");
        if (output_val) val = to_view(*output_val, fn, "output_val");
        if (output_idx_offset) off = to_view(*output_idx_offset, fn, "output_idx_offset");
        select::TopkOptions o;
        o.sorted = sorted;
        o.sorted_index = sorted_index;
        o.idx_oob_fill_value = idx_oob_fill_value;
        o.value_oob_fill_value = value_oob_fill_value;
        o.abort_when_nan_found = abort_when_nan_found;
        select::topk(in, topk, begin ? &b : nullptr, end ? &e : nullptr, output_val ? &val : nullptr, idx,
                     output_idx_offset ? &off : nullptr, o);
      },
      nb::arg("input"), nb::arg("topk"), nb::arg("begin").none(), nb::arg("end").none(), nb::arg("output_val").none(),
      nb::arg("output_idx"), nb::arg("output_idx_offset").none(), nb::arg("sorted"), nb::arg("sorted_index"),
      nb::arg("idx_oob_fill_value"), nb::arg("value_oob_fill_value"), nb::arg("abort_when_nan_found"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def("select_stride_requirement", &select::get_stride_requirement);
  m.attr("select_max_topk") = select::kMaxTopk;
}

}  // namespace tessera::python
