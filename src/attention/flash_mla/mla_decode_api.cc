// flash_mla_with_kvcache and get_mla_metadata (FlashMLA's API, docs/attention.md).
#include <cmath>
#include <cstdint>
#include <utility>

#include "attention/flash_mla/mla_decode.h"
#include "attention/flash_mla/mla_schedule.h"
#include "tessera/core/thread_pool.h"

namespace tessera::flash_mla {
namespace {

constexpr const char* kFn = "flash_mla_with_kvcache";

DecodeSetup setup_decode(const KvcacheInputs& in, const TensorView& out, const TensorView& lse) {
  TESSERA_CHECK(!in.softmax_scale || std::isfinite(*in.softmax_scale), kFn,
                ": argument 'softmax_scale' must be finite, got ", *in.softmax_scale);
  return in.indices ? make_sparse_decode(kFn, in, out, lse) : make_dense_decode(kFn, in, out, lse);
}

}  // namespace

void check_decode_outputs(const char* fn, const KvcacheInputs& in, const TensorView& out, const TensorView& lse,
                          int64_t d_v) {
  const TensorView& q = in.q;
  check_defined(fn, "out", out);
  check_dtype(fn, "out", out, {q.dtype});
  check_ndim(fn, "out", out, {4});
  check_dim(fn, "out", out, 0, q.shape[0], "batch_size");
  check_dim(fn, "out", out, 1, q.shape[1], "seq_len_q");
  check_dim(fn, "out", out, 2, q.shape[2], "num_heads_q");
  check_dim(fn, "out", out, 3, d_v, "head_dim_v");
  TESSERA_CHECK(out.strides[3] == 1 || d_v == 1, fn, ": argument 'out' must have a contiguous last dim, got strides ",
                out.strides_str());
  check_defined(fn, "lse", lse);
  check_dtype(fn, "lse", lse, {DType::kF32});
  check_ndim(fn, "lse", lse, {3});
  check_dim(fn, "lse", lse, 0, q.shape[0], "batch_size");
  check_dim(fn, "lse", lse, 1, q.shape[2], "num_heads_q");
  check_dim(fn, "lse", lse, 2, q.shape[1], "seq_len_q");
  check_no_overlap(fn, "out", out, "q", q);
  check_no_overlap(fn, "out", out, "lse", lse);
  const std::pair<const char*, const TensorView*> inputs[] = {{"q", &in.q},
                                                              {"k_cache", &in.k_cache},
                                                              {"block_table", in.block_table},
                                                              {"cache_seqlens", in.cache_seqlens},
                                                              {"indices", in.indices},
                                                              {"attn_sink", in.attn_sink},
                                                              {"extra_k_cache", in.extra_k_cache},
                                                              {"extra_indices_in_kvcache", in.extra_indices_in_kvcache},
                                                              {"topk_length", in.topk_length},
                                                              {"extra_topk_length", in.extra_topk_length}};
  for (const auto& [name, view] : inputs) {
    if (!view) continue;
    check_no_overlap(fn, "out", out, name, *view);
    check_no_overlap(fn, "lse", lse, name, *view);
  }
}

SchedConfig decode_config(const KvcacheInputs& in) {
  SchedConfig c;
  c.b = in.q.ndim > 0 ? in.q.shape[0] : 0;
  c.s_q = in.q.ndim > 1 ? in.q.shape[1] : 0;
  c.h_q = in.q.ndim > 2 ? in.q.shape[2] : 0;
  c.page_block_size = in.k_cache.ndim > 1 ? in.k_cache.shape[1] : 0;
  c.h_k = in.k_cache.ndim > 2 ? in.k_cache.shape[2] : 0;
  c.causal = in.causal;
  c.is_fp8_kvcache = in.is_fp8_kvcache;
  if (in.indices && in.indices->ndim > 0) c.topk = in.indices->shape[in.indices->ndim - 1];
  if (in.extra_k_cache && in.extra_k_cache->ndim > 1) c.extra_page_block_size = in.extra_k_cache->shape[1];
  if (in.extra_indices_in_kvcache && in.extra_indices_in_kvcache->ndim > 0)
    c.extra_topk = in.extra_indices_in_kvcache->shape[in.extra_indices_in_kvcache->ndim - 1];
  return c;
}

static void check_request_count(const KvcacheInputs& in) {
  TESSERA_CHECK(in.q.ndim < 1 || in.q.shape[0] <= kMaxRequests, kFn, ": argument 'q' must hold at most ", kMaxRequests,
                " requests (batch_size), got shape ", in.q.shape_str());
}

void flash_mla_with_kvcache(const KvcacheInputs& in, SchedMeta& meta, const TensorView& out, const TensorView& lse) {
  check_request_count(in);
  const SchedConfig now = decode_config(in);
  if (meta.have_initialized) check_same_config(kFn, meta.config, now);
  DecodeSetup s = setup_decode(in, out, lse);
  Schedule schedule = meta.have_initialized ? meta.schedule : make_schedule(s.lens, s.units_per_item, num_threads());
  check_schedule(kFn, schedule, s.task->requests);
  run_mla(*s.task, schedule);
  if (!meta.have_initialized) {
    meta.have_initialized = true;
    meta.config = now;
    meta.schedule = std::move(schedule);
  }
}

void flash_mla_with_kvcache(const KvcacheInputs& in, const Schedule& schedule, const TensorView& out,
                            const TensorView& lse) {
  check_request_count(in);
  DecodeSetup s = setup_decode(in, out, lse);
  check_schedule(kFn, schedule, s.task->requests);
  run_mla(*s.task, schedule);
}

Schedule get_mla_metadata(const TensorView& cache_seqlens, int64_t num_q_tokens_per_head_k, int64_t num_heads_k,
                          std::optional<int64_t> num_heads_q, bool is_fp8_kvcache, std::optional<int64_t> topk) {
  const char* fn = "get_mla_metadata";
  check_defined(fn, "cache_seqlens", cache_seqlens);
  check_dtype(fn, "cache_seqlens", cache_seqlens, {DType::kI32});
  check_ndim(fn, "cache_seqlens", cache_seqlens, {1});
  TESSERA_CHECK(num_heads_k >= 1, fn, ": argument 'num_heads_k' must be >= 1, got ", num_heads_k);
  TESSERA_CHECK(num_q_tokens_per_head_k >= 1, fn, ": argument 'num_q_tokens_per_head_k' must be >= 1, got ",
                num_q_tokens_per_head_k);
  const int64_t b = cache_seqlens.shape[0];
  TESSERA_CHECK(b <= kMaxRequests, fn, ": argument 'cache_seqlens' must hold at most ", kMaxRequests, " requests, got ",
                b);
  std::vector<int64_t> lens;
  int64_t units_per_item;
  if (topk) {
    TESSERA_CHECK(*topk >= 0 && *topk <= INT32_MAX, fn, ": argument 'topk' must be in [0, 2^31 - 1], got ", *topk);
    const int64_t h_q = num_heads_q.value_or(num_q_tokens_per_head_k * num_heads_k);
    TESSERA_CHECK(h_q >= 1 && (num_q_tokens_per_head_k * num_heads_k) % h_q == 0, fn, ": argument 'num_heads_q' (", h_q,
                  ") must divide num_q_tokens_per_head_k * num_heads_k = ", num_q_tokens_per_head_k * num_heads_k);
    const int64_t s_q = num_q_tokens_per_head_k * num_heads_k / h_q;
    lens.assign(size_t(b), *topk);
    units_per_item = s_q * row_blocks(int(h_q));
  } else {
    for (int64_t i = 0; i < b; ++i) {
      const int64_t len = cache_seqlens.ptr<int32_t>()[i * cache_seqlens.strides[0]];
      TESSERA_CHECK(len >= 0, fn, ": argument 'cache_seqlens': cache_seqlens[", i, "] = ", len, " must be >= 0");
      lens.push_back(len);
    }
    units_per_item = num_heads_k * row_blocks(int(std::min<int64_t>(num_q_tokens_per_head_k, 1 << 20)));
  }
  return make_schedule(lens, units_per_item, num_threads());
}

}  // namespace tessera::flash_mla
