// FlashMLA (tessera/flash_mla.h): decode, sparse and dense prefill (and its backward), the FP8 KV-cache quantiser.
// Arrays arrive as ArrayRef; outputs are allocated by the Python wrapper (tessera/flash_mla) and passed in. Compute
// calls run without the GIL. Schedules cross as flat int32 lists.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "array_ref.h"
#include "bindings.h"
#include "tessera/flash_mla.h"

namespace nb = nanobind;

namespace tessera::python {
namespace {

using ScheduleLists = std::tuple<std::vector<int32_t>, int64_t, std::vector<int32_t>>;

ScheduleLists to_lists(const flash_mla::Schedule& s) {
  return {s.tile_scheduler_metadata, s.parts, s.num_splits};
}

flash_mla::KvCacheLayout layout_from_name(const std::string& name) {
  if (name == "V32") return flash_mla::KvCacheLayout::kV32;
  if (name == "MODEL1") return flash_mla::KvCacheLayout::kModel1;
  fail(ErrorCode::kInvalidArgument, "quantize_k_cache: argument 'kvcache_layout' must be V32 or MODEL1, got ", name);
}

// The arguments the dense prefill's forward and backward share, named after `fn` in errors.
flash_mla::VarlenInputs varlen_inputs(const char* fn, const ArrayRef& q, const ArrayRef& k, const ArrayRef& v,
                                      const ArrayRef& cu_seqlens_qo, const ArrayRef& cu_seqlens_kv,
                                      int64_t max_seqlen_qo, int64_t max_seqlen_kv, std::optional<double> softmax_scale,
                                      bool causal) {
  flash_mla::VarlenInputs in;
  in.q = to_view(q, fn, "q");
  in.k = to_view(k, fn, "k");
  in.v = to_view(v, fn, "v");
  in.cu_seqlens_qo = to_view(cu_seqlens_qo, fn, "cu_seqlens_qo");
  in.cu_seqlens_kv = to_view(cu_seqlens_kv, fn, "cu_seqlens_kv");
  in.max_seqlen_qo = max_seqlen_qo;
  in.max_seqlen_kv = max_seqlen_kv;
  in.softmax_scale = softmax_scale;
  in.causal = causal;
  return in;
}

// Optional array arguments: a view stored in `slot` and a pointer to it, or nullptr.
const TensorView* optional_view(const ArrayRef* ref, const char* fn, const char* arg, TensorView* slot) {
  if (!ref) return nullptr;
  *slot = to_view(*ref, fn, arg);
  return slot;
}

ScheduleLists with_kvcache(const ArrayRef& q, const ArrayRef& k_cache, const ArrayRef* block_table,
                           const ArrayRef* cache_seqlens, int64_t head_dim_v,
                           std::optional<std::vector<int32_t>> tile_md, std::optional<std::vector<int32_t>> num_splits,
                           std::optional<double> softmax_scale, bool causal, bool is_fp8_kvcache,
                           const ArrayRef* indices, const ArrayRef* attn_sink, const ArrayRef* extra_k_cache,
                           const ArrayRef* extra_indices, const ArrayRef* topk_length,
                           const ArrayRef* extra_topk_length, const ArrayRef& out, const ArrayRef& lse) {
  const char* fn = "flash_mla_with_kvcache";
  TensorView views[8];
  flash_mla::KvcacheInputs in;
  in.q = to_view(q, fn, "q");
  in.k_cache = to_view(k_cache, fn, "k_cache");
  in.block_table = optional_view(block_table, fn, "block_table", &views[0]);
  in.cache_seqlens = optional_view(cache_seqlens, fn, "cache_seqlens", &views[1]);
  in.head_dim_v = head_dim_v;
  in.softmax_scale = softmax_scale;
  in.causal = causal;
  in.is_fp8_kvcache = is_fp8_kvcache;
  in.indices = optional_view(indices, fn, "indices", &views[2]);
  in.attn_sink = optional_view(attn_sink, fn, "attn_sink", &views[3]);
  in.extra_k_cache = optional_view(extra_k_cache, fn, "extra_k_cache", &views[4]);
  in.extra_indices_in_kvcache = optional_view(extra_indices, fn, "extra_indices_in_kvcache", &views[5]);
  in.topk_length = optional_view(topk_length, fn, "topk_length", &views[6]);
  in.extra_topk_length = optional_view(extra_topk_length, fn, "extra_topk_length", &views[7]);
  const TensorView out_v = to_view(out, fn, "out"), lse_v = to_view(lse, fn, "lse");
  if (!tile_md) {  // the first call on a FlashMLASchedMeta: plan now and hand the plan back
    flash_mla::SchedMeta meta;
    flash_mla::flash_mla_with_kvcache(in, meta, out_v, lse_v);
    return to_lists(meta.schedule);
  }
  flash_mla::Schedule s;
  s.tile_scheduler_metadata = std::move(*tile_md);
  s.parts = int64_t(s.tile_scheduler_metadata.size() / 8);
  s.num_splits = num_splits.value_or(std::vector<int32_t>{});
  flash_mla::flash_mla_with_kvcache(in, s, out_v, lse_v);
  return to_lists(s);
}

}  // namespace

void bind_flash_mla(nb::module_& m) {
  m.def(
      "flash_mla_get_metadata",
      [](const ArrayRef& cache_seqlens, int64_t num_q_tokens_per_head_k, int64_t num_heads_k,
         std::optional<int64_t> num_heads_q, bool is_fp8_kvcache, std::optional<int64_t> topk) {
        return to_lists(flash_mla::get_mla_metadata(to_view(cache_seqlens, "get_mla_metadata", "cache_seqlens"),
                                                    num_q_tokens_per_head_k, num_heads_k, num_heads_q, is_fp8_kvcache,
                                                    topk));
      },
      nb::arg("cache_seqlens"), nb::arg("num_q_tokens_per_head_k"), nb::arg("num_heads_k"),
      nb::arg("num_heads_q").none(), nb::arg("is_fp8_kvcache"), nb::arg("topk").none());
  m.def("flash_mla_with_kvcache", &with_kvcache, nb::arg("q"), nb::arg("k_cache"), nb::arg("block_table").none(),
        nb::arg("cache_seqlens").none(), nb::arg("head_dim_v"), nb::arg("tile_scheduler_metadata").none(),
        nb::arg("num_splits").none(), nb::arg("softmax_scale").none(), nb::arg("causal"), nb::arg("is_fp8_kvcache"),
        nb::arg("indices").none(), nb::arg("attn_sink").none(), nb::arg("extra_k_cache").none(),
        nb::arg("extra_indices_in_kvcache").none(), nb::arg("topk_length").none(), nb::arg("extra_topk_length").none(),
        nb::arg("out"), nb::arg("lse"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "flash_mla_sparse_fwd",
      [](const ArrayRef& q, const ArrayRef& kv, const ArrayRef& indices, double sm_scale, int64_t d_v,
         const ArrayRef* attn_sink, const ArrayRef* topk_length, const ArrayRef& out, const ArrayRef& max_logits,
         const ArrayRef& lse) {
        const char* fn = "flash_mla_sparse_fwd";
        TensorView sink_v, len_v;
        flash_mla::SparsePrefillInputs in;
        in.q = to_view(q, fn, "q");
        in.kv = to_view(kv, fn, "kv");
        in.indices = to_view(indices, fn, "indices");
        in.sm_scale = sm_scale;
        in.d_v = d_v;
        in.attn_sink = optional_view(attn_sink, fn, "attn_sink", &sink_v);
        in.topk_length = optional_view(topk_length, fn, "topk_length", &len_v);
        flash_mla::flash_mla_sparse_fwd(in, to_view(out, fn, "out"), to_view(max_logits, fn, "max_logits"),
                                        to_view(lse, fn, "lse"));
      },
      nb::arg("q"), nb::arg("kv"), nb::arg("indices"), nb::arg("sm_scale"), nb::arg("d_v"), nb::arg("attn_sink").none(),
      nb::arg("topk_length").none(), nb::arg("out"), nb::arg("max_logits"), nb::arg("lse"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "flash_attn_varlen_fwd",
      [](const ArrayRef& q, const ArrayRef& k, const ArrayRef& v, const ArrayRef& cu_seqlens_qo,
         const ArrayRef& cu_seqlens_kv, int64_t max_seqlen_qo, int64_t max_seqlen_kv,
         std::optional<double> softmax_scale, bool causal, const ArrayRef& out, const ArrayRef& lse) {
        const char* fn = "flash_attn_varlen_func";
        const flash_mla::VarlenInputs in = varlen_inputs(fn, q, k, v, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo,
                                                         max_seqlen_kv, softmax_scale, causal);
        flash_mla::flash_attn_varlen_fwd(in, to_view(out, fn, "out"), to_view(lse, fn, "lse"));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("cu_seqlens_qo"), nb::arg("cu_seqlens_kv"),
      nb::arg("max_seqlen_qo"), nb::arg("max_seqlen_kv"), nb::arg("softmax_scale").none(), nb::arg("causal"),
      nb::arg("out"), nb::arg("lse"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "flash_attn_varlen_bwd",
      [](const ArrayRef& q, const ArrayRef& k, const ArrayRef& v, const ArrayRef& cu_seqlens_qo,
         const ArrayRef& cu_seqlens_kv, int64_t max_seqlen_qo, int64_t max_seqlen_kv,
         std::optional<double> softmax_scale, bool causal, const ArrayRef& out, const ArrayRef& lse,
         const ArrayRef& dout, const ArrayRef* dlse, const ArrayRef& dq, const ArrayRef& dk, const ArrayRef& dv) {
        const char* fn = "flash_attn_varlen_bwd";
        const flash_mla::VarlenInputs in = varlen_inputs(fn, q, k, v, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo,
                                                         max_seqlen_kv, softmax_scale, causal);
        TensorView dlse_v;
        flash_mla::flash_attn_varlen_bwd(in, to_view(out, fn, "out"), to_view(lse, fn, "lse"),
                                         to_view(dout, fn, "dout"), to_view(dq, fn, "dq"), to_view(dk, fn, "dk"),
                                         to_view(dv, fn, "dv"), optional_view(dlse, fn, "dlse", &dlse_v));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("cu_seqlens_qo"), nb::arg("cu_seqlens_kv"),
      nb::arg("max_seqlen_qo"), nb::arg("max_seqlen_kv"), nb::arg("softmax_scale").none(), nb::arg("causal"),
      nb::arg("out"), nb::arg("lse"), nb::arg("dout"), nb::arg("dlse").none(), nb::arg("dq"), nb::arg("dk"),
      nb::arg("dv"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "flash_mla_quantize_k_cache",
      [](const ArrayRef& k, const std::string& layout, const ArrayRef& out) {
        flash_mla::quantize_k_cache(to_view(k, "quantize_k_cache", "input_k_cache"), layout_from_name(layout),
                                    to_view(out, "quantize_k_cache", "out"));
      },
      nb::arg("input_k_cache"), nb::arg("kvcache_layout"), nb::arg("out"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "flash_mla_dequantize_k_cache",
      [](const ArrayRef& quant, const std::string& layout, const ArrayRef& out) {
        flash_mla::dequantize_k_cache(to_view(quant, "dequantize_k_cache", "quant_k_cache"), layout_from_name(layout),
                                      to_view(out, "dequantize_k_cache", "out"));
      },
      nb::arg("quant_k_cache"), nb::arg("kvcache_layout"), nb::arg("out"), nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace tessera::python
