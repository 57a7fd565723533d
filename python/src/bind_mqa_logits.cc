// DeepGEMM's MQA logits of tessera/mqa_logits.h. The Python wrapper
// (tessera/deep_gemm/_mqa.py) allocates the logits; every compute call runs without the GIL.
#include <nanobind/stl/optional.h>

#include "array_ref.h"
#include "bindings.h"
#include "tessera/mqa_logits.h"

namespace nb = nanobind;

namespace tessera::python {

void bind_mqa_logits(nb::module_& m) {
  m.def(
      "fp8_fp4_mqa_logits",
      [](const ArrayRef& q, const ArrayRef* q_sf, const ArrayRef& kv, const ArrayRef& kv_sf, const ArrayRef& weights,
         const ArrayRef& ks, const ArrayRef& ke, const ArrayRef& logits, bool clean_logits, int64_t max_seqlen_k) {
        const char* fn = "fp8_fp4_mqa_logits";
        TensorView qs;
        if (q_sf) qs = to_view(*q_sf, fn, "q_sf");
        attention::fp8_fp4_mqa_logits(to_view(q, fn, "q"), q_sf ? &qs : nullptr, to_view(kv, fn, "kv"),
                                      to_view(kv_sf, fn, "kv_sf"), to_view(weights, fn, "weights"),
                                      to_view(ks, fn, "cu_seq_len_k_start"), to_view(ke, fn, "cu_seq_len_k_end"),
                                      to_view(logits, fn, "logits"), clean_logits, max_seqlen_k);
      },
      nb::arg("q"), nb::arg("q_sf").none(), nb::arg("kv"), nb::arg("kv_sf"), nb::arg("weights"), nb::arg("ks"),
      nb::arg("ke"), nb::arg("logits"), nb::arg("clean_logits"), nb::arg("max_seqlen_k"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "get_paged_mqa_logits_metadata",
      [](const ArrayRef& context_lens, int block_kv, int num_sms, const ArrayRef& out) {
        const char* fn = "get_paged_mqa_logits_metadata";
        attention::get_paged_mqa_logits_metadata(to_view(context_lens, fn, "context_lens"), block_kv, num_sms,
                                                 to_view(out, fn, "out"));
      },
      nb::arg("context_lens"), nb::arg("block_kv"), nb::arg("num_sms"), nb::arg("out"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "fp8_fp4_paged_mqa_logits",
      [](const ArrayRef& q, const ArrayRef* q_sf, const ArrayRef& kv_cache, const ArrayRef& weights,
         const ArrayRef& context_lens, const ArrayRef& block_table, const ArrayRef& schedule_meta,
         const ArrayRef& logits, int64_t max_context_len, bool clean_logits, const ArrayRef* indices) {
        const char* fn = "fp8_fp4_paged_mqa_logits";
        TensorView qs, iv;
        if (q_sf) qs = to_view(*q_sf, fn, "q_sf");
        if (indices) iv = to_view(*indices, fn, "indices");
        attention::fp8_fp4_paged_mqa_logits(
            to_view(q, fn, "q"), q_sf ? &qs : nullptr, to_view(kv_cache, fn, "kv_cache"),
            to_view(weights, fn, "weights"), to_view(context_lens, fn, "context_lens"),
            to_view(block_table, fn, "block_table"), to_view(schedule_meta, fn, "schedule_meta"),
            to_view(logits, fn, "logits"), max_context_len, clean_logits, indices ? &iv : nullptr);
      },
      nb::arg("q"), nb::arg("q_sf").none(), nb::arg("kv_cache"), nb::arg("weights"), nb::arg("context_lens"),
      nb::arg("block_table"), nb::arg("schedule_meta"), nb::arg("logits"), nb::arg("max_context_len"),
      nb::arg("clean_logits"), nb::arg("indices").none(), nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace tessera::python
