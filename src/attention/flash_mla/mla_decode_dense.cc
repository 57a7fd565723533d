// Dense decode over a paged bf16/fp16 KV cache (FlashMLA's API, docs/attention.md; dense).
// Group g = (request b, KV head kvh) with rows (s, h) for the s_q query tokens and the h_q / h_k query
// heads of that KV head; the token list is the request's cache positions 0..L-1. bf16 cache rows with a
// contiguous last dimension are read in place by the bf16 kernels; others are converted per tile.
#include <algorithm>
#include <cmath>
#include <memory>

#include "attention/flash_mla/mla_decode.h"
#include "attention/flash_mla/mla_rows.h"

namespace tessera::flash_mla {
namespace {

class DenseDecode final : public MlaTask {
 public:
  TensorView q, k, block_table, seqlens, out, lse;
  int64_t s_q = 0, h_k = 0, heads_per_kv = 0, block_size = 0;
  int block_shift = -1;
  bool causal = false, direct = false;
  bool streamed = false;  // a block's rows are one contiguous run the hardware prefetcher follows

  int32_t seqlen(int64_t b) const { return seqlens.ptr<int32_t>()[b * seqlens.strides[0]]; }

  int64_t open_group(int64_t g, TokenList* list) const override {
    list->n = seqlen(g / h_k);
    return list->n;
  }

  int64_t visible_tokens(int64_t g, int r, int64_t n) const override {
    if (!causal) return n;
    const int64_t s = r / heads_per_kv;
    return std::clamp<int64_t>(n - s_q + s + 1, 0, n);
  }

  void load_q(int64_t g, int r0, int nr, void* dst) const override {
    const int64_t b = g / h_k, kvh = g % h_k;
    const size_t es = kernels->elem == cpu::MlaElem::kBF16 ? 2 : 4;
    for (int i = 0; i < nr; ++i) {
      const int64_t r = r0 + i, s = r / heads_per_kv, h = kvh * heads_per_kv + r % heads_per_kv;
      const uint16_t* src = q.ptr<uint16_t>() + b * q.strides[0] + s * q.strides[1] + h * q.strides[2];
      load_row(src, q.dtype, q.strides[3], d_qk, *kernels, static_cast<char*>(dst) + size_t(i) * d_qk * es);
    }
  }

  void fetch(const TokenList& list, int64_t p, int nt, void* buf, const void** rows) const override {
    const int64_t b = list.group / h_k, kvh = list.group % h_k;
    const int32_t* bt = block_table.ptr<int32_t>() + b * block_table.strides[0];
    const size_t es = kernels->elem == cpu::MlaElem::kBF16 ? 2 : 4;
    for (int i = 0; i < nt; ++i) {
      int64_t j, off;
      split_slot(p + i, block_size, block_shift, &j, &off);
      const int64_t block = bt[j * block_table.strides[1]];
      const uint16_t* src = k.ptr<uint16_t>() + block * k.strides[0] + off * k.strides[1] + kvh * k.strides[2];
      if (direct) {
        rows[i] = src;
      } else {
        void* dst = static_cast<char*>(buf) + size_t(i) * d_qk * es;
        load_row(src, k.dtype, k.strides[3], d_qk, *kernels, dst);
        rows[i] = dst;
      }
    }
  }

  // A row alone is only d*2 bytes (18 cache lines for d = 576), too short for the hardware prefetcher
  // to ramp up, so rows apart from each other are requested into L2 for the next tile while this one
  // computes. The rows of a block that lie back to back (one KV head, packed rows: FlashMLA's paged
  // cache) are one run of block_size rows, which the hardware prefetcher follows by itself when the
  // kernel reads them in place; requesting every line there as well only held the fill buffers.
  void prefetch(const TokenList& list, int64_t p, int nt) const override {
    if (streamed) return;
    const int64_t b = list.group / h_k, kvh = list.group % h_k;
    const int32_t* bt = block_table.ptr<int32_t>() + b * block_table.strides[0];
    const int64_t es = dtype_storage_bytes(k.dtype), row_bytes = (d_qk - 1) * k.strides[3] * es + es;
    for (int i = 0; i < nt; ++i) {
      int64_t j, off;
      split_slot(p + i, block_size, block_shift, &j, &off);
      const char* src = static_cast<const char*>(k.data) +
                        (bt[j * block_table.strides[1]] * k.strides[0] + off * k.strides[1] + kvh * k.strides[2]) * es;
      for (int64_t o = 0; o < row_bytes; o += 64) __builtin_prefetch(src + o, 0, 2);
      __builtin_prefetch(src + row_bytes - 1, 0, 2);
    }
  }

  void store(int64_t g, int r, const float* o, float lse_value, float) const override {
    const int64_t b = g / h_k, kvh = g % h_k, s = r / heads_per_kv, h = kvh * heads_per_kv + r % heads_per_kv;
    const int64_t es = dtype_storage_bytes(out.dtype);
    char* dst = static_cast<char*>(out.data) + (b * out.strides[0] + s * out.strides[1] + h * out.strides[2]) * es;
    store_row(o, d_v, 1.0f, out.dtype, dst);
    lse.ptr<float>()[b * lse.strides[0] + h * lse.strides[1] + s * lse.strides[2]] = lse_value;
  }
};

}  // namespace

DecodeSetup make_dense_decode(const char* fn, const KvcacheInputs& in, const TensorView& out, const TensorView& lse) {
  const TensorView& q = in.q;
  const TensorView& k = in.k_cache;
  TESSERA_CHECK(
      !in.attn_sink && !in.extra_k_cache && !in.extra_indices_in_kvcache && !in.topk_length && !in.extra_topk_length,
      fn,
      ": arguments 'attn_sink', 'extra_k_cache', 'extra_indices_in_kvcache', 'topk_length' and "
      "'extra_topk_length' must be None when dense attention is used (indices is None)");
  if (in.is_fp8_kvcache)
    TESSERA_NOT_IMPLEMENTED(fn,
                            ": dense decode over an FP8 KV cache (is_fp8_kvcache=True without indices); "
                            "use a bf16/fp16 cache, or sparse decode with indices");
  TESSERA_CHECK(in.block_table && in.cache_seqlens, fn,
                ": arguments 'block_table' and 'cache_seqlens' must be provided when dense attention is used");
  check_defined(fn, "q", q);
  check_dtype(fn, "q", q, {DType::kBF16, DType::kF16});
  check_ndim(fn, "q", q, {4});
  check_defined(fn, "k_cache", k);
  check_ndim(fn, "k_cache", k, {4});
  TESSERA_CHECK(k.dtype == q.dtype, fn, ": argument 'k_cache' must have q's dtype ", dtype_name(q.dtype), ", got ",
                dtype_name(k.dtype));
  const int64_t b = q.shape[0], s_q = q.shape[1], h_q = q.shape[2], d = q.shape[3];
  const int64_t blocks = k.shape[0], block_size = k.shape[1], h_k = k.shape[2];
  TESSERA_CHECK(d >= 1 && k.shape[3] == d, fn, ": argument 'k_cache' must have head_dim ", d,
                " (q's last dim) in "
                "dim 3, got shape ",
                k.shape_str());
  TESSERA_CHECK(block_size >= 1 && h_k >= 1, fn,
                ": argument 'k_cache' must have page_block_size >= 1 and "
                "num_heads_k >= 1, got shape ",
                k.shape_str());
  TESSERA_CHECK(h_q >= 1 && h_q % h_k == 0, fn, ": num_heads_q (", h_q,
                ") must be a positive multiple of "
                "num_heads_k (",
                h_k, ")");
  TESSERA_CHECK(h_q / h_k * s_q <= (int64_t(1) << 20), fn,
                ": seq_len_q * num_heads_q / num_heads_k must be <= 2^20, "
                "got ",
                h_q / h_k * s_q);
  TESSERA_CHECK(in.head_dim_v >= 1 && in.head_dim_v <= d, fn, ": argument 'head_dim_v' must be in [1, ", d, "], got ",
                in.head_dim_v);
  const TensorView& bt = *in.block_table;
  const TensorView& sl = *in.cache_seqlens;
  check_defined(fn, "block_table", bt);
  check_dtype(fn, "block_table", bt, {DType::kI32});
  check_ndim(fn, "block_table", bt, {2});
  check_dim(fn, "block_table", bt, 0, b, "batch_size");
  check_defined(fn, "cache_seqlens", sl);
  check_dtype(fn, "cache_seqlens", sl, {DType::kI32});
  check_ndim(fn, "cache_seqlens", sl, {1});
  check_dim(fn, "cache_seqlens", sl, 0, b, "batch_size");
  DecodeSetup setup;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t len = sl.ptr<int32_t>()[i * sl.strides[0]];
    TESSERA_CHECK(len >= 0 && len <= bt.shape[1] * block_size, fn, ": argument 'cache_seqlens': cache_seqlens[", i,
                  "] = ", len, " must be in [0, max_num_blocks * page_block_size = ", bt.shape[1] * block_size, "]");
    for (int64_t j = 0; j < (len + block_size - 1) / block_size; ++j) {
      const int64_t blk = bt.ptr<int32_t>()[i * bt.strides[0] + j * bt.strides[1]];
      TESSERA_CHECK(blk >= 0 && blk < blocks, fn, ": argument 'block_table': block_table[", i, ", ", j, "] = ", blk,
                    " must be in [0, ", blocks, ") (num_blocks of k_cache): it holds tokens below cache_seqlens[", i,
                    "] = ", len);
    }
    setup.lens.push_back(len);
  }
  check_decode_outputs(fn, in, out, lse, in.head_dim_v);

  auto task = std::make_unique<DenseDecode>();
  task->requests = b;
  task->groups_per_request = h_k;
  task->rows = int(s_q * (h_q / h_k));
  task->d_qk = int(d);
  task->d_v = int(in.head_dim_v);
  task->scale = float(in.softmax_scale.value_or(1.0 / std::sqrt(double(d))));
  task->kernels = choose_kernels(q.dtype == DType::kBF16, d, in.head_dim_v);
  task->q = q;
  task->k = k;
  task->block_table = bt;
  task->seqlens = sl;
  task->out = out;
  task->lse = lse;
  task->s_q = s_q;
  task->h_k = h_k;
  task->heads_per_kv = h_q / h_k;
  task->block_size = block_size;
  task->block_shift = power_of_two_shift(block_size);
  task->causal = in.causal;
  task->direct = task->kernels->elem == cpu::MlaElem::kBF16 && k.strides[3] == 1;
  // Rows read in place in runs of at least 4 KiB (whole pages for the hardware prefetcher); the fp32
  // kernels' conversion pass measured 2-3% slower without the requests (avx2).
  task->streamed = task->direct && k.strides[1] == d && block_size * d * dtype_storage_bytes(k.dtype) >= 4096;
  setup.units_per_item = h_k * row_blocks(task->rows);
  setup.config = decode_config(in);
  setup.task = std::move(task);
  return setup;
}

}  // namespace tessera::flash_mla
