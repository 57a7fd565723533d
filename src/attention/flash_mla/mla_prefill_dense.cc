// flash_attn_varlen_fwd: dense MHA prefill forward over variable-length requests (FlashMLA's API,
// docs/attention.md). Group g = (request i, KV head kvh) with rows (query j, head) for the n_q(i) queries and the
// h_q / h_kv query heads of that KV head; the token list is the request's keys 0..n_kv(i)-1, with V rows
// from v (separate_v). bf16 rows with a contiguous last dimension are read in place.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "attention/flash_mla/mla_rows.h"
#include "attention/flash_mla/mla_schedule.h"
#include "attention/flash_mla/mla_task.h"
#include "attention/flash_mla/mla_varlen_args.h"
#include "tessera/core/thread_pool.h"

namespace tessera::flash_mla {
namespace {

constexpr const char* kFn = "flash_attn_varlen_func";

class VarlenPrefill final : public MlaTask {
 public:
  TensorView q, k, v, out, lse;
  std::vector<int64_t> q_begin, q_len, kv_begin, kv_len;  // per request
  int64_t h_kv = 0, heads_per_kv = 0;
  bool causal = false, direct_k = false, direct_v = false;

  int64_t rows_of(int64_t g) const override { return q_len[size_t(g / h_kv)] * heads_per_kv; }

  int64_t open_group(int64_t g, TokenList* list) const override {
    list->n = kv_len[size_t(g / h_kv)];
    return list->n;
  }

  int64_t visible_tokens(int64_t g, int r, int64_t n) const override {
    if (!causal) return n;
    const int64_t j = r / heads_per_kv;
    return std::clamp<int64_t>(n - q_len[size_t(g / h_kv)] + j + 1, 0, n);
  }

  void load_q(int64_t g, int r0, int nr, void* dst) const override {
    const int64_t i = g / h_kv, kvh = g % h_kv;
    const size_t es = kernels->elem == cpu::MlaElem::kBF16 ? 2 : 4;
    for (int x = 0; x < nr; ++x) {
      const int64_t r = r0 + x, token = q_begin[size_t(i)] + r / heads_per_kv;
      const int64_t h = kvh * heads_per_kv + r % heads_per_kv;
      const uint16_t* src = q.ptr<uint16_t>() + token * q.strides[0] + h * q.strides[1];
      load_row(src, q.dtype, q.strides[2], d_qk, *kernels, static_cast<char*>(dst) + size_t(x) * d_qk * es);
    }
  }

  void rows_of_tensor(const TensorView& t, bool direct, int64_t n, const TokenList& list, int64_t p, int nt, void* buf,
                      const void** rows) const {
    const int64_t i = list.group / h_kv, kvh = list.group % h_kv;
    const size_t es = kernels->elem == cpu::MlaElem::kBF16 ? 2 : 4;
    for (int x = 0; x < nt; ++x) {
      const uint16_t* src = t.ptr<uint16_t>() + (kv_begin[size_t(i)] + p + x) * t.strides[0] + kvh * t.strides[1];
      if (direct) {
        rows[x] = src;
      } else {
        void* dst = static_cast<char*>(buf) + size_t(x) * n * es;
        load_row(src, t.dtype, t.strides[2], n, *kernels, dst);
        rows[x] = dst;
      }
    }
  }

  void fetch(const TokenList& list, int64_t p, int nt, void* buf, const void** rows) const override {
    rows_of_tensor(k, direct_k, d_qk, list, p, nt, buf, rows);
  }

  void fetch_v(const TokenList& list, int64_t p, int nt, void* buf, const void** rows) const override {
    rows_of_tensor(v, direct_v, d_v, list, p, nt, buf, rows);
  }

  void store(int64_t g, int r, const float* o, float lse_value, float) const override {
    const int64_t i = g / h_kv, token = q_begin[size_t(i)] + r / heads_per_kv;
    const int64_t h = (g % h_kv) * heads_per_kv + r % heads_per_kv;
    char* dst = static_cast<char*>(out.data) + (token * out.strides[0] + h * out.strides[1]) * 2;
    store_row(o, d_v, 1.0f, out.dtype, dst);
    lse.ptr<float>()[token * lse.strides[0] + h * lse.strides[1]] = lse_value;
  }
};

}  // namespace

void flash_attn_varlen_fwd(const VarlenInputs& in, const TensorView& out, const TensorView& lse) {
  const TensorView &q = in.q, &k = in.k, &v = in.v;
  VarlenLayout l = check_varlen_inputs(kFn, in);
  static const char* const kOutDims[] = {"total_q", "num_heads", "head_dim of v"};
  check_varlen_tensor(kFn, "out", out, {q.dtype}, {l.total_q, l.h_q, l.d_v}, kOutDims, true, in);
  check_varlen_tensor(kFn, "lse", lse, {DType::kF32}, {l.total_q, l.h_q}, kOutDims, false, in);
  for (const auto& [name, t] : {std::pair<const char*, const TensorView*>{"q", &q}, {"k", &k}, {"v", &v}})
    check_no_overlap(kFn, "lse", lse, name, *t);
  const int64_t b = l.b, h_q = l.h_q, h_kv = l.h_kv, d_qk = l.d_qk, d_v = l.d_v;
  auto task = std::make_unique<VarlenPrefill>();
  task->q_begin = std::move(l.q_begin);
  task->q_len = std::move(l.q_len);
  task->kv_begin = std::move(l.kv_begin);
  task->kv_len = std::move(l.kv_len);
  check_no_overlap(kFn, "out", out, "lse", lse);

  task->requests = b;
  task->groups_per_request = h_kv;
  task->heads_per_kv = h_q / h_kv;
  task->rows = int(in.max_seqlen_qo * task->heads_per_kv);
  task->d_qk = int(d_qk);
  task->d_v = int(d_v);
  task->scale = float(l.scale);
  task->separate_v = true;
  task->kernels = choose_kernels(q.dtype == DType::kBF16, d_qk, d_v);
  task->q = q;
  task->k = k;
  task->v = v;
  task->out = out;
  task->lse = lse;
  task->h_kv = h_kv;
  task->causal = in.causal;
  task->direct_k = task->kernels->elem == cpu::MlaElem::kBF16 && k.strides[2] == 1;
  task->direct_v = task->kernels->elem == cpu::MlaElem::kBF16 && v.strides[2] == 1;
  int64_t total_rows = 0;
  for (int64_t n : task->q_len) total_rows += n * task->heads_per_kv;
  const int64_t blocks_per_group = b ? std::max<int64_t>(1, row_blocks((total_rows + b - 1) / b)) : 1;
  run_mla(*task, make_schedule(task->kv_len, h_kv * blocks_per_group, num_threads()));
}

}  // namespace tessera::flash_mla
