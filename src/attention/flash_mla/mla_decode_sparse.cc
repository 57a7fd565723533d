// Sparse decode over an FP8 KV cache (FlashMLA's API, docs/attention.md; sparse).
// Group g = (request b, query token s) with the h_q heads as rows; its token list is the valid entries of
// indices[b, s, :topk_length[b]] followed by the valid entries of the extra cache's list. An index < 0 or
// >= blocks * block_size is skipped, so unreferenced slots are never read. Tokens are dequantised into
// the tile buffer by the kernel set; the next tile's bytes are prefetched while the current one computes.
#include <cmath>
#include <cstdint>
#include <memory>

#include "attention/flash_mla/mla_decode.h"
#include "attention/flash_mla/mla_rows.h"

namespace tessera::flash_mla {
namespace {

struct IndexList {
  TensorView indices, length;  // length may be undefined (all topk entries count)
  int64_t topk = 0;
  Fp8Cache cache;
};

class SparseDecode final : public MlaTask {
 public:
  TensorView q, out, lse;
  const float* sink = nullptr;
  int64_t sink_stride = 0;
  int64_t s_q = 0;
  IndexList main, extra;
  bool has_extra = false;

  static void collect(const IndexList& l, int64_t b, int64_t s, std::vector<int64_t>* slots) {
    int64_t len = l.topk;
    if (l.length.data) len = l.length.ptr<int32_t>()[b * l.length.strides[0]];
    const int32_t* idx = l.indices.ptr<int32_t>() + b * l.indices.strides[0] + s * l.indices.strides[1];
    const int64_t limit = l.cache.slots();
    for (int64_t i = 0; i < len; ++i) {
      const int64_t v = idx[i * l.indices.strides[2]];
      if (v >= 0 && v < limit) slots->push_back(v);
    }
  }

  int64_t open_group(int64_t g, TokenList* list) const override {
    list->slots.clear();
    collect(main, g / s_q, g % s_q, &list->slots);
    list->n_main = int64_t(list->slots.size());
    if (has_extra) collect(extra, g / s_q, g % s_q, &list->slots);
    list->n = int64_t(list->slots.size());
    return list->n;
  }

  void load_q(int64_t g, int r0, int nr, void* dst) const override {
    const int64_t b = g / s_q, s = g % s_q;
    const size_t es = kernels->elem == cpu::MlaElem::kBF16 ? 2 : 4;
    for (int i = 0; i < nr; ++i) {
      const uint16_t* src = q.ptr<uint16_t>() + b * q.strides[0] + s * q.strides[1] + (r0 + i) * q.strides[2];
      load_row(src, q.dtype, q.strides[3], d_qk, *kernels, static_cast<char*>(dst) + size_t(i) * d_qk * es);
    }
  }

  const Fp8Cache& cache_of(const TokenList& list, int64_t pos) const {
    return pos < list.n_main ? main.cache : extra.cache;
  }

  void fetch(const TokenList& list, int64_t p, int nt, void* buf, const void** rows) const override {
    const size_t row_bytes = size_t(d_qk) * (kernels->elem == cpu::MlaElem::kBF16 ? 2 : 4);
    for (int i = 0; i < nt; ++i) {
      const Fp8Cache& c = cache_of(list, p + i);
      const int64_t slot = list.slots[size_t(p + i)];
      void* dst = static_cast<char*>(buf) + size_t(i) * row_bytes;
      if (c.layout == KvCacheLayout::kV32) {
        kernels->dequant_v32(c.token(slot), dst);
      } else {
        kernels->dequant_model1(c.token(slot), c.model1_scales(slot), dst);
      }
      rows[i] = dst;
    }
  }

  bool rows_scattered() const override { return true; }

  void prefetch(const TokenList& list, int64_t p, int nt) const override {
    for (int i = 0; i < nt; ++i) {
      const Fp8Cache& c = cache_of(list, p + i);
      const int64_t slot = list.slots[size_t(p + i)];
      const uint8_t* t = c.token(slot);
      const int bytes = c.layout == KvCacheLayout::kV32 ? 656 : 576;
      // Into L2 (locality 2): a tile of tokens is ~60 KiB, more than L1 holds next to the working set.
      for (int off = 0; off < bytes; off += 64) __builtin_prefetch(t + off, 0, 2);
      __builtin_prefetch(t + bytes - 1, 0, 2);
      if (c.layout == KvCacheLayout::kModel1) __builtin_prefetch(c.model1_scales(slot), 0, 2);
    }
  }

  void store(int64_t g, int r, const float* o, float lse_value, float) const override {
    const int64_t b = g / s_q, s = g % s_q;
    char* dst = static_cast<char*>(out.data) + (b * out.strides[0] + s * out.strides[1] + r * out.strides[2]) * 2;
    store_row(o, d_v, sink_factor(sink ? sink + r * sink_stride : nullptr, lse_value), out.dtype, dst);
    lse.ptr<float>()[b * lse.strides[0] + r * lse.strides[1] + s * lse.strides[2]] = lse_value;
  }
};

IndexList check_index_list(const char* fn, const char* indices_arg, const TensorView& indices, const char* length_arg,
                           const TensorView* length, const char* cache_arg, const TensorView& cache, int64_t b,
                           int64_t s_q) {
  IndexList l;
  l.cache = check_fp8_cache(fn, cache_arg, cache);
  check_defined(fn, indices_arg, indices);
  check_dtype(fn, indices_arg, indices, {DType::kI32});
  check_ndim(fn, indices_arg, indices, {3});
  check_dim(fn, indices_arg, indices, 0, b, "batch_size");
  check_dim(fn, indices_arg, indices, 1, s_q, "seq_len_q");
  TESSERA_CHECK(indices.shape[2] <= INT32_MAX, fn, ": argument '", indices_arg,
                "' must list at most 2^31 - 1 tokens per query (topk), got ", indices.shape[2]);
  l.indices = indices;
  l.topk = indices.shape[2];
  if (length) {
    check_defined(fn, length_arg, *length);
    check_dtype(fn, length_arg, *length, {DType::kI32});
    check_ndim(fn, length_arg, *length, {1});
    check_dim(fn, length_arg, *length, 0, b, "batch_size");
    for (int64_t i = 0; i < b; ++i) {
      const int64_t v = length->ptr<int32_t>()[i * length->strides[0]];
      TESSERA_CHECK(v >= 0 && v <= l.topk, fn, ": argument '", length_arg, "': ", length_arg, "[", i, "] = ", v,
                    " must be in [0, ", l.topk, "] (the last dim of ", indices_arg, ")");
    }
    l.length = *length;
  }
  return l;
}

}  // namespace

DecodeSetup make_sparse_decode(const char* fn, const KvcacheInputs& in, const TensorView& out, const TensorView& lse) {
  const TensorView& q = in.q;
  TESSERA_CHECK(!in.causal, fn, ": argument 'causal' must be False when sparse attention is enabled (indices given)");
  TESSERA_CHECK(in.is_fp8_kvcache, fn,
                ": argument 'is_fp8_kvcache' must be True when sparse attention is enabled "
                "(indices given); sparse decode reads the FP8 cache layouts only");
  check_defined(fn, "q", q);
  check_dtype(fn, "q", q, {DType::kBF16});
  check_ndim(fn, "q", q, {4});
  const int64_t b = q.shape[0], s_q = q.shape[1], h_q = q.shape[2], d = q.shape[3];
  TESSERA_CHECK(h_q >= 1 && h_q <= (int64_t(1) << 20), fn, ": num_heads_q must be in [1, 2^20], got ", h_q);
  auto task = std::make_unique<SparseDecode>();
  task->main =
      check_index_list(fn, "indices", *in.indices, "topk_length", in.topk_length, "k_cache", in.k_cache, b, s_q);
  const int64_t want_d = task->main.cache.layout == KvCacheLayout::kV32 ? 576 : 512;
  TESSERA_CHECK(d == want_d, fn, ": argument 'q' must have head_dim ", want_d, " for the ",
                want_d == 576 ? "V32 (656-byte)" : "MODEL1 (584-byte)", " cache layout, got shape ", q.shape_str());
  TESSERA_CHECK(in.head_dim_v == 512, fn, ": argument 'head_dim_v' must be 512 for sparse decode, got ", in.head_dim_v);
  TESSERA_CHECK(bool(in.extra_k_cache) == bool(in.extra_indices_in_kvcache), fn,
                ": arguments 'extra_k_cache' and 'extra_indices_in_kvcache' must be given together");
  TESSERA_CHECK(!in.extra_topk_length || in.extra_k_cache, fn,
                ": argument 'extra_topk_length' needs 'extra_k_cache' and 'extra_indices_in_kvcache'");
  if (in.extra_k_cache) {
    task->extra = check_index_list(fn, "extra_indices_in_kvcache", *in.extra_indices_in_kvcache, "extra_topk_length",
                                   in.extra_topk_length, "extra_k_cache", *in.extra_k_cache, b, s_q);
    TESSERA_CHECK(task->extra.cache.layout == task->main.cache.layout, fn,
                  ": argument 'extra_k_cache' must have the "
                  "layout of 'k_cache' (",
                  in.k_cache.shape[3], " bytes per token), got ", in.extra_k_cache->shape[3]);
    task->has_extra = true;
  }
  if (in.attn_sink) {
    const TensorView& sink = *in.attn_sink;
    check_defined(fn, "attn_sink", sink);
    check_dtype(fn, "attn_sink", sink, {DType::kF32});
    check_ndim(fn, "attn_sink", sink, {1});
    check_dim(fn, "attn_sink", sink, 0, h_q, "num_heads_q");
    task->sink = sink.ptr<float>();
    task->sink_stride = sink.strides[0];
  }
  check_decode_outputs(fn, in, out, lse, 512);

  task->requests = b;
  task->groups_per_request = s_q;
  task->rows = int(h_q);
  task->d_qk = int(d);
  task->d_v = 512;
  task->scale = float(in.softmax_scale.value_or(1.0 / std::sqrt(double(d))));
  task->kernels = choose_kernels(true, d, 512);
  task->q = q;
  task->out = out;
  task->lse = lse;
  task->s_q = s_q;
  DecodeSetup setup;
  setup.lens.assign(size_t(b), task->main.topk + (task->has_extra ? task->extra.topk : 0));
  setup.units_per_item = s_q * row_blocks(task->rows);
  setup.config = decode_config(in);
  setup.task = std::move(task);
  return setup;
}

}  // namespace tessera::flash_mla
