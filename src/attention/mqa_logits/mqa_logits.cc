// fp8_fp4_mqa_logits: validation, then blocks of `query_block` queries x chunks of kChunk keys as work
// items. An item builds its queries' panels, converts its keys to the kernel set's element type one
// tile of `tile_rows` rows at a time (the tile and one query panel stay in L1 or close) and runs the
// kernel for each query of the block on the rows inside its range.
#include "tessera/mqa_logits.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "attention/mqa_logits/mqa_common.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"

namespace tessera::attention {
namespace {

using detail::is_packed_fp4;

constexpr const char* kFn = "fp8_fp4_mqa_logits";
constexpr int64_t kChunk = 4096;

struct Range {
  int64_t lo, hi;  // keys [lo, hi) of a query, already clipped to [0, S_kv)
};

void check_shapes(const TensorView& q, const TensorView* q_sf, const TensorView& kv, const TensorView& kv_sf,
                  const TensorView& weights, const TensorView& ks, const TensorView& ke, const TensorView& logits,
                  bool clean_logits, int64_t max_seqlen_k) {
  check_defined(kFn, "q", q);
  check_dtype(kFn, "q", q, {DType::kF8E4M3, DType::kF4E2M1, DType::kI8, DType::kU8});
  check_ndim(kFn, "q", q, {3});
  const bool fp4 = is_packed_fp4(q.dtype);
  const int64_t s = q.size(0), h = q.size(1), d = detail::logical_dim(q.dtype, q.size(2));
  TESSERA_CHECK(h >= 1 && h <= 128, kFn, ": argument 'q' must have 1 to 128 heads, got ", h);
  detail::check_head_dim(kFn, d, fp4);
  TESSERA_CHECK(!fp4 || q.stride(2) == 1, kFn, ": argument 'q' in packed FP4 must have stride(2) == 1, got strides ",
                q.strides_str());
  detail::check_q_sf(kFn, q_sf, fp4, {s, h});

  check_defined(kFn, "kv", kv);
  check_ndim(kFn, "kv", kv, {2});
  TESSERA_CHECK(is_packed_fp4(kv.dtype) == fp4 && (fp4 || kv.dtype == DType::kF8E4M3), kFn,
                ": argument 'kv' must have q's format (", fp4 ? "packed FP4" : "float8_e4m3fn", "), got ",
                dtype_name(kv.dtype));
  check_dim(kFn, "kv", kv, 1, fp4 ? d / 2 : d, "q's head_dim (bytes)");
  TESSERA_CHECK(kv.stride(1) == 1 || kv.size(1) <= 1, kFn, ": argument 'kv' must have stride(1) == 1, got strides ",
                kv.strides_str());
  const int64_t s_kv = kv.size(0);
  TESSERA_CHECK(s_kv < INT_MAX, kFn, ": argument 'kv' must have fewer than 2^31 - 1 rows, got ", s_kv);
  check_defined(kFn, "kv_sf", kv_sf);
  check_dtype(kFn, "kv_sf", kv_sf, {q_sf ? DType::kI32 : DType::kF32});
  check_ndim(kFn, "kv_sf", kv_sf, {1});
  check_dim(kFn, "kv_sf", kv_sf, 0, s_kv, "the number of kv rows");

  check_defined(kFn, "weights", weights);
  check_ndim(kFn, "weights", weights, {2});
  check_dim(kFn, "weights", weights, 0, s, "seq_len");
  check_dim(kFn, "weights", weights, 1, h, "num_heads");
  check_dtype(kFn, "weights", weights, {DType::kF32, DType::kBF16});
  TESSERA_CHECK(weights.stride(1) == 1 || h == 1, kFn, ": argument 'weights' must have stride(1) == 1, got strides ",
                weights.strides_str());
  for (const auto& [name, t] :
       {std::pair<const char*, const TensorView*>{"cu_seq_len_k_start", &ks}, {"cu_seq_len_k_end", &ke}}) {
    check_defined(kFn, name, *t);
    check_dtype(kFn, name, *t, {DType::kI32});
    check_ndim(kFn, name, *t, {1});
    check_dim(kFn, name, *t, 0, s, "seq_len");
  }

  TESSERA_CHECK(max_seqlen_k >= 0, kFn, ": argument 'max_seqlen_k' must be >= 0, got ", max_seqlen_k);
  TESSERA_CHECK(!(max_seqlen_k > 0 && clean_logits), kFn,
                ": argument 'clean_logits' must be False in compressed mode (max_seqlen_k > 0)");
  check_defined(kFn, "logits", logits);
  check_dtype(kFn, "logits", logits, {DType::kF32, DType::kBF16});
  TESSERA_CHECK(weights.dtype != DType::kBF16 || logits.dtype == DType::kBF16, kFn,
                ": argument 'weights' may be bfloat16 only with bfloat16 logits");
  check_ndim(kFn, "logits", logits, {2});
  check_dim(kFn, "logits", logits, 0, s, "seq_len");
  check_dim(kFn, "logits", logits, 1, max_seqlen_k > 0 ? max_seqlen_k : s_kv,
            max_seqlen_k > 0 ? "max_seqlen_k" : "seq_len_kv");
  check_row_major(kFn, "logits", logits);
  const TensorView* inputs[] = {&q, q_sf, &kv, &kv_sf, &weights, &ks, &ke};
  const char* names[] = {"q", "q_sf", "kv", "kv_sf", "weights", "cu_seq_len_k_start", "cu_seq_len_k_end"};
  for (int i = 0; i < 7; ++i)
    if (inputs[i]) check_no_overlap(kFn, "logits", logits, names[i], *inputs[i]);
}

// Per-query key ranges; compressed mode requires them inside [0, S_kv] and within max_seqlen_k.
std::vector<Range> query_ranges(const TensorView& ks, const TensorView& ke, int64_t s_kv, int64_t max_seqlen_k) {
  std::vector<Range> r(static_cast<size_t>(ks.size(0)));
  for (int64_t i = 0; i < ks.size(0); ++i) {
    const int64_t b = ks.ptr<const int32_t>()[i * ks.stride(0)], e = ke.ptr<const int32_t>()[i * ke.stride(0)];
    if (max_seqlen_k > 0) {
      TESSERA_CHECK(b >= 0 && b <= e && e <= s_kv && e - b <= max_seqlen_k, kFn,
                    ": in compressed mode arguments 'cu_seq_len_k_start'/'cu_seq_len_k_end' must satisfy 0 <= ks <= "
                    "ke <= seq_len_kv and ke - ks <= max_seqlen_k, got ks[",
                    i, "] = ", b, ", ke[", i, "] = ", e, " (seq_len_kv ", s_kv, ", max_seqlen_k ", max_seqlen_k, ")");
    }
    const int64_t lo = std::clamp<int64_t>(b, 0, s_kv), hi = std::clamp<int64_t>(e, 0, s_kv);
    r[size_t(i)] = {lo, std::max(lo, hi)};
  }
  return r;
}

struct Item {
  int64_t q0, q1;  // queries [q0, q1)
  int64_t k0, k1;  // keys [k0, k1)
};

}  // namespace

void fp8_fp4_mqa_logits(const TensorView& q, const TensorView* q_sf, const TensorView& kv, const TensorView& kv_sf,
                        const TensorView& weights, const TensorView& ks, const TensorView& ke, const TensorView& logits,
                        bool clean_logits, int64_t max_seqlen_k) {
  check_shapes(q, q_sf, kv, kv_sf, weights, ks, ke, logits, clean_logits, max_seqlen_k);
  const int64_t s = q.size(0), s_kv = kv.size(0);
  const std::vector<Range> ranges = query_ranges(ks, ke, s_kv, max_seqlen_k);
  if (s == 0) return;
  const bool fp4 = is_packed_fp4(q.dtype);
  const int dim = int(detail::logical_dim(q.dtype, q.size(2)));

  detail::QuerySource qs{};
  qs.data = static_cast<const uint8_t*>(q.data);
  qs.stride_outer = q.stride(0);
  qs.stride_inner = 0;
  qs.inner = 1;
  qs.stride_head = q.stride(1);
  qs.stride_d = q.stride(2);
  qs.fp4 = fp4;
  qs.sf = q_sf ? q_sf->ptr<const int32_t>() : nullptr;
  qs.sf_outer = q_sf ? q_sf->stride(0) : 0;
  qs.sf_head = q_sf ? q_sf->stride(1) : 0;
  qs.weights = weights.data;
  qs.weights_bf16 = weights.dtype == DType::kBF16;
  qs.w_stride = weights.stride(0);
  qs.heads = int(q.size(1));
  qs.dim = dim;
  const detail::KeyFormat kf{fp4, q_sf != nullptr, dim};
  const detail::LogitsOut out{static_cast<char*>(logits.data), logits.stride(0) * dtype_storage_bytes(logits.dtype),
                              logits.dtype == DType::kBF16};
  const bool compressed = max_seqlen_k > 0;

  if (clean_logits) {
    parallel_for(s, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        out.fill_neg_inf(i, 0, ranges[size_t(i)].lo);
        out.fill_neg_inf(i, ranges[size_t(i)].hi, s_kv);
      }
    });
  }

  // Work items: a block of queries x one aligned chunk of the block's key range; cost = key rows the
  // kernel runs plus the rows converted.
  std::vector<Item> items;
  std::vector<int64_t> cost;
  const cpu::MqaLogitsKernels& kernels = detail::mqa_kernels(kFn);
  const int64_t query_block = kernels.query_block;
  for (int64_t q0 = 0; q0 < s; q0 += query_block) {
    const int64_t q1 = std::min(s, q0 + query_block);
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t i = q0; i < q1; ++i)
      if (ranges[size_t(i)].hi > ranges[size_t(i)].lo) {
        lo = std::min(lo, ranges[size_t(i)].lo);
        hi = std::max(hi, ranges[size_t(i)].hi);
      }
    for (int64_t c = lo == INT64_MAX ? hi : lo / kChunk * kChunk; c < hi; c += kChunk) {
      const Item it{q0, q1, std::max(c, lo), std::min(c + kChunk, hi)};
      int64_t work = it.k1 - it.k0;
      for (int64_t i = q0; i < q1; ++i)
        work += std::max<int64_t>(0, std::min(it.k1, ranges[size_t(i)].hi) - std::max(it.k0, ranges[size_t(i)].lo)) * 8;
      items.push_back(it);
      cost.push_back(work);
    }
  }
  if (items.empty()) return;

  // Each item builds its block's query panels into its thread's scratch: one array of every query's
  // panels (8 MiB at S = 512, H = 64, D = 128) was mapped and faulted in afresh by every call, 13% of
  // a 512 x 2048 call on AMX. An item repeats the build per chunk only when a block spans several.
  const int64_t panel_bytes = kernels.panel_bytes(qs.heads, dim), weight_elems = qs.weight_elems();
  const int64_t row_bytes = int64_t(dim) * kernels.key_bytes;  // of a converted key row
  const uint8_t* kv_data = static_cast<const uint8_t*>(kv.data);
  const uint8_t* sf_data = static_cast<const uint8_t*>(kv_sf.data);
  const int64_t kv_row_bytes = kv.stride(0), sf_stride_bytes = kv_sf.stride(0) * 4;

  detail::run_items_balanced(cost, [&](int64_t n) {
    const Item& it = items[size_t(n)];
    const int tile_rows = kernels.tile_rows;
    auto* panels = static_cast<char*>(thread_scratch(3, size_t((it.q1 - it.q0) * panel_bytes)));
    auto* block_weights = static_cast<float*>(thread_scratch(4, size_t((it.q1 - it.q0) * weight_elems) * 4));
    for (int64_t i = it.q0; i < it.q1; ++i)
      detail::build_query_panel(kernels, qs, i, panels + (i - it.q0) * panel_bytes,
                                block_weights + (i - it.q0) * weight_elems);
    auto* tile = static_cast<char*>(thread_scratch(0, size_t(tile_rows * row_bytes)));
    auto* scale = static_cast<float*>(thread_scratch(1, size_t(tile_rows) * 4));
    auto* tmp = static_cast<float*>(thread_scratch(2, size_t(tile_rows) * 4));
    for (int64_t t0 = it.k0; t0 < it.k1; t0 += tile_rows) {
      const int rows = int(std::min<int64_t>(tile_rows, it.k1 - t0));
      detail::convert_key_rows(kernels, kf, kv_data + t0 * kv_row_bytes, kv_row_bytes, sf_data + t0 * sf_stride_bytes,
                               sf_stride_bytes, rows, tile, scale);
      for (int64_t i = it.q0; i < it.q1; ++i) {
        const int64_t r0 = std::max(t0, ranges[size_t(i)].lo), r1 = std::min(t0 + rows, ranges[size_t(i)].hi);
        if (r0 >= r1) continue;
        const int64_t col = compressed ? r0 - ranges[size_t(i)].lo : r0;
        float* direct = out.direct(i, col);
        cpu::MqaRowsArgs a{panels + (i - it.q0) * panel_bytes,
                           block_weights + (i - it.q0) * weight_elems,
                           qs.heads,
                           qs.head_vectors(),
                           dim,
                           tile + (r0 - t0) * row_bytes,
                           dim,
                           scale + (r0 - t0),
                           int(r1 - r0),
                           direct ? direct : tmp};
        kernels.rows(a);
        if (!direct) out.store(i, col, tmp, r1 - r0);
      }
    }
  });
}

}  // namespace tessera::attention
