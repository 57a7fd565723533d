// flash_mla_sparse_fwd: sparse MLA prefill over a bf16 kv (FlashMLA's API, docs/attention.md).
// Group g = (query token s, KV head kvh) with the h_q / h_kv query heads of that KV head as rows; its
// token list is the valid entries of indices[s, kvh, :topk_length[s]] (0 <= index < s_kv).
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "attention/flash_mla/mla_rows.h"
#include "attention/flash_mla/mla_schedule.h"
#include "attention/flash_mla/mla_task.h"
#include "tessera/core/thread_pool.h"

namespace tessera::flash_mla {
namespace {

constexpr const char* kFn = "flash_mla_sparse_fwd";

class SparsePrefill final : public MlaTask {
 public:
  TensorView q, kv, indices, topk_length, out, max_logits, lse;
  const float* sink = nullptr;
  int64_t sink_stride = 0;
  int64_t h_kv = 0, heads_per_kv = 0, topk = 0;
  bool direct = false;

  int64_t open_group(int64_t g, TokenList* list) const override {
    const int64_t s = g / h_kv, kvh = g % h_kv;
    int64_t len = topk;
    if (topk_length.data) len = topk_length.ptr<int32_t>()[s * topk_length.strides[0]];
    const int32_t* idx = indices.ptr<int32_t>() + s * indices.strides[0] + kvh * indices.strides[1];
    list->slots.clear();
    for (int64_t i = 0; i < len; ++i) {
      const int64_t v = idx[i * indices.strides[2]];
      if (v >= 0 && v < kv.shape[0]) list->slots.push_back(v);
    }
    list->n = list->n_main = int64_t(list->slots.size());
    return list->n;
  }

  void load_q(int64_t g, int r0, int nr, void* dst) const override {
    const int64_t s = g / h_kv, kvh = g % h_kv;
    const size_t es = kernels->elem == cpu::MlaElem::kBF16 ? 2 : 4;
    for (int i = 0; i < nr; ++i) {
      const int64_t h = kvh * heads_per_kv + r0 + i;
      const uint16_t* src = q.ptr<uint16_t>() + s * q.strides[0] + h * q.strides[1];
      load_row(src, q.dtype, q.strides[2], d_qk, *kernels, static_cast<char*>(dst) + size_t(i) * d_qk * es);
    }
  }

  void fetch(const TokenList& list, int64_t p, int nt, void* buf, const void** rows) const override {
    const int64_t kvh = list.group % h_kv;
    const size_t es = kernels->elem == cpu::MlaElem::kBF16 ? 2 : 4;
    for (int i = 0; i < nt; ++i) {
      const uint16_t* src = kv.ptr<uint16_t>() + list.slots[size_t(p + i)] * kv.strides[0] + kvh * kv.strides[1];
      if (direct) {
        rows[i] = src;
      } else {
        void* dst = static_cast<char*>(buf) + size_t(i) * d_qk * es;
        load_row(src, kv.dtype, kv.strides[2], d_qk, *kernels, dst);
        rows[i] = dst;
      }
    }
  }

  bool rows_scattered() const override { return true; }

  void prefetch(const TokenList& list, int64_t p, int nt) const override {
    const int64_t kvh = list.group % h_kv;
    for (int i = 0; i < nt; ++i) {
      const char* src =
          static_cast<const char*>(kv.data) + (list.slots[size_t(p + i)] * kv.strides[0] + kvh * kv.strides[1]) * 2;
      for (int off = 0; off < d_qk * 2; off += 64) __builtin_prefetch(src + off, 0, 2);
    }
  }

  void store(int64_t g, int r, const float* o, float lse_value, float max_logit) const override {
    const int64_t s = g / h_kv, h = (g % h_kv) * heads_per_kv + r;
    char* dst = static_cast<char*>(out.data) + (s * out.strides[0] + h * out.strides[1]) * 2;
    store_row(o, d_v, sink_factor(sink ? sink + h * sink_stride : nullptr, lse_value), out.dtype, dst);
    max_logits.ptr<float>()[s * max_logits.strides[0] + h * max_logits.strides[1]] = max_logit;
    lse.ptr<float>()[s * lse.strides[0] + h * lse.strides[1]] = lse_value;
  }
};

void check_stat_output(const char* arg, const TensorView& t, int64_t s_q, int64_t h_q) {
  check_defined(kFn, arg, t);
  check_dtype(kFn, arg, t, {DType::kF32});
  check_ndim(kFn, arg, t, {2});
  check_dim(kFn, arg, t, 0, s_q, "s_q");
  check_dim(kFn, arg, t, 1, h_q, "h_q");
}

}  // namespace

void flash_mla_sparse_fwd(const SparsePrefillInputs& in, const TensorView& out, const TensorView& max_logits,
                          const TensorView& lse) {
  const TensorView &q = in.q, &kv = in.kv, &idx = in.indices;
  check_defined(kFn, "q", q);
  check_dtype(kFn, "q", q, {DType::kBF16});
  check_ndim(kFn, "q", q, {3});
  check_defined(kFn, "kv", kv);
  check_dtype(kFn, "kv", kv, {DType::kBF16});
  check_ndim(kFn, "kv", kv, {3});
  const int64_t s_q = q.shape[0], h_q = q.shape[1], d_qk = q.shape[2], h_kv = kv.shape[1];
  TESSERA_CHECK(d_qk >= 1 && kv.shape[2] == d_qk, kFn, ": argument 'kv' must have d_qk = ", d_qk,
                " (q's last dim) in dim 2, got shape ", kv.shape_str());
  TESSERA_CHECK(h_kv >= 1 && h_q >= 1 && h_q % h_kv == 0, kFn, ": h_q (", h_q,
                ") must be a positive multiple of "
                "h_kv (",
                h_kv, ")");
  TESSERA_CHECK(h_q / h_kv <= (int64_t(1) << 20), kFn, ": h_q / h_kv must be <= 2^20, got ", h_q / h_kv);
  TESSERA_CHECK(in.d_v >= 1 && in.d_v <= d_qk, kFn, ": argument 'd_v' must be in [1, d_qk = ", d_qk, "], got ", in.d_v);
  TESSERA_CHECK(std::isfinite(in.sm_scale), kFn, ": argument 'sm_scale' must be finite, got ", in.sm_scale);
  check_defined(kFn, "indices", idx);
  check_dtype(kFn, "indices", idx, {DType::kI32});
  check_ndim(kFn, "indices", idx, {3});
  check_dim(kFn, "indices", idx, 0, s_q, "s_q");
  check_dim(kFn, "indices", idx, 1, h_kv, "h_kv");
  TESSERA_CHECK(idx.shape[2] <= INT32_MAX, kFn,
                ": argument 'indices' must list at most 2^31 - 1 tokens per query (topk), got ", idx.shape[2]);
  auto task = std::make_unique<SparsePrefill>();
  task->topk = idx.shape[2];
  if (in.topk_length) {
    const TensorView& tl = *in.topk_length;
    check_defined(kFn, "topk_length", tl);
    check_dtype(kFn, "topk_length", tl, {DType::kI32});
    check_ndim(kFn, "topk_length", tl, {1});
    check_dim(kFn, "topk_length", tl, 0, s_q, "s_q");
    for (int64_t i = 0; i < s_q; ++i) {
      const int64_t v = tl.ptr<int32_t>()[i * tl.strides[0]];
      TESSERA_CHECK(v >= 0 && v <= task->topk, kFn, ": argument 'topk_length': topk_length[", i, "] = ", v,
                    " must be in [0, ", task->topk, "] (the last dim of indices)");
    }
    task->topk_length = tl;
  }
  if (in.attn_sink) {
    const TensorView& sink = *in.attn_sink;
    check_defined(kFn, "attn_sink", sink);
    check_dtype(kFn, "attn_sink", sink, {DType::kF32});
    check_ndim(kFn, "attn_sink", sink, {1});
    check_dim(kFn, "attn_sink", sink, 0, h_q, "h_q");
    task->sink = sink.ptr<float>();
    task->sink_stride = sink.strides[0];
  }
  check_defined(kFn, "out", out);
  check_dtype(kFn, "out", out, {DType::kBF16});
  check_ndim(kFn, "out", out, {3});
  check_dim(kFn, "out", out, 0, s_q, "s_q");
  check_dim(kFn, "out", out, 1, h_q, "h_q");
  check_dim(kFn, "out", out, 2, in.d_v, "d_v");
  TESSERA_CHECK(out.strides[2] == 1 || in.d_v == 1, kFn,
                ": argument 'out' must have a contiguous last dim, got "
                "strides ",
                out.strides_str());
  check_stat_output("max_logits", max_logits, s_q, h_q);
  check_stat_output("lse", lse, s_q, h_q);
  const std::pair<const char*, const TensorView*> outs[] = {{"out", &out}, {"max_logits", &max_logits}, {"lse", &lse}};
  for (const auto& [name, view] : outs) {
    check_no_overlap(kFn, name, *view, "q", q);
    check_no_overlap(kFn, name, *view, "kv", kv);
    check_no_overlap(kFn, name, *view, "indices", idx);
  }
  check_no_overlap(kFn, "out", out, "max_logits", max_logits);
  check_no_overlap(kFn, "out", out, "lse", lse);
  check_no_overlap(kFn, "max_logits", max_logits, "lse", lse);

  task->requests = s_q;
  task->groups_per_request = h_kv;
  task->rows = int(h_q / h_kv);
  task->d_qk = int(d_qk);
  task->d_v = int(in.d_v);
  task->scale = float(in.sm_scale);
  task->kernels = choose_kernels(true, d_qk, in.d_v);
  task->q = q;
  task->kv = kv;
  task->indices = idx;
  task->out = out;
  task->max_logits = max_logits;
  task->lse = lse;
  task->h_kv = h_kv;
  task->heads_per_kv = h_q / h_kv;
  task->direct = task->kernels->elem == cpu::MlaElem::kBF16 && kv.strides[2] == 1;
  const std::vector<int64_t> lens(size_t(s_q), task->topk);
  run_mla(*task, make_schedule(lens, h_kv * row_blocks(task->rows), num_threads()));
}

}  // namespace tessera::flash_mla
