// flash_attn_varlen_bwd: the dense MHA prefill backward (FlashAttention-2 style, FlashMLA's API,
// docs/attention.md). Group (request i, KV head g) has rows r = (query j, head of the group) as in the
// forward. P = exp(scale * q.k - lse) is recomputed from the forward's lse. Two passes over independent
// tasks claimed by the pool's threads:
//  1. per (i, g, row tile), over key tiles: delta = sum_t P dP - dlse (= rowsum(dO * O) in fp32: the bf16
//     `out` would cancel badly when a row sees few keys) and dQ = scale * (sum P dP K - delta * sum P K);
//  2. per (i, g, key tile), over row tiles: dV = sum P^T dO, dK = scale * sum dS^T Q, dS = P (dP - delta).
// Every output element is summed by one task in a fixed tile order, so the bits do not depend on the
// thread count.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "attention/flash_mla/mla_rows.h"
#include "attention/flash_mla/mla_varlen_args.h"
#include "backends/cpu/mla_bwd_kernel_set.h"
#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"

namespace tessera::flash_mla {
namespace {

constexpr const char* kFn = "flash_attn_varlen_bwd";
using cpu::kBwdKeys;
using cpu::kBwdRows;
using cpu::KeyTile;
using cpu::RowTile;

// n elements of t[token, head, :] (bf16|fp16, any element stride) as fp32.
void widen(const TensorView& t, int64_t token, int64_t head, int64_t n, float* dst) {
  const uint16_t* s = t.ptr<uint16_t>() + token * t.strides[0] + head * t.strides[1];
  const int64_t st = t.strides[2];
  if (t.dtype == DType::kBF16) {
    for (int64_t c = 0; c < n; ++c) dst[c] = bf16_to_f32(s[c * st]);
  } else {
    for (int64_t c = 0; c < n; ++c) dst[c] = f16_to_f32(s[c * st]);
  }
}

struct Problem {
  VarlenLayout l;
  TensorView q, k, v, out, lse, dout, dq, dk, dv;
  const TensorView* dlse = nullptr;
  int64_t hp = 1;  // query heads per KV head
  float scale = 0;
  bool causal = false;
  const cpu::MlaBwdKernelSet* ks = nullptr;
  std::vector<float> delta;  // [total_q * h_q]: sum_t P dP - dlse, written by the row pass

  int64_t rows(int64_t i) const { return l.q_len[size_t(i)] * hp; }
  // Keys row r of request i sees (a prefix of the request's keys).
  int64_t visible(int64_t i, int64_t r) const {
    const int64_t n = l.kv_len[size_t(i)];
    return causal ? std::clamp<int64_t>(n - l.q_len[size_t(i)] + r / hp + 1, 0, n) : n;
  }
  int64_t token(int64_t i, int64_t r) const { return l.q_begin[size_t(i)] + r / hp; }
  int64_t head(int64_t g, int64_t r) const { return g * hp + r % hp; }
};

// Buffers of one thread.
struct Scratch {
  std::vector<float> kt, vt, krows, vrow, q, dout, lse, delta, p, dp, acc_a, acc_b, acc_c;
  std::vector<int> vis;
  explicit Scratch(const Problem& pb) {
    const size_t dq = size_t(pb.l.d_qk), dv = size_t(pb.l.d_v), R = kBwdRows, K = kBwdKeys;
    kt.resize(dq * K);
    vt.resize(dv * K);
    krows.resize(K * dq);
    vrow.resize(dv);
    q.resize(R * dq);
    dout.resize(R * dv);
    lse.resize(R);
    delta.resize(R);
    vis.resize(R);
    p.resize(R * K);
    dp.resize(R * K);
    acc_a.resize(std::max(K, R) * dq);
    acc_b.resize(K * dv);
    acc_c.resize(R * dq);
  }
};

// Loads keys [k0, k0 + nk) of request i, KV head g: transposed K and V (zero-padded to kBwdKeys columns)
// and, when `rows_too`, K row-major.
KeyTile load_keys(const Problem& pb, int64_t i, int64_t g, int64_t k0, int nk, bool rows_too, Scratch& s) {
  const int64_t dq = pb.l.d_qk, dv = pb.l.d_v;
  std::fill(s.kt.begin(), s.kt.end(), 0.0f);
  std::fill(s.vt.begin(), s.vt.end(), 0.0f);
  float* row = s.krows.data();
  for (int t = 0; t < nk; ++t) {
    const int64_t tok = pb.l.kv_begin[size_t(i)] + k0 + t;
    float* kr = rows_too ? row + int64_t(t) * dq : row;
    widen(pb.k, tok, g, dq, kr);
    for (int64_t c = 0; c < dq; ++c) s.kt[size_t(c * kBwdKeys + t)] = kr[c];
    float* vr = s.vrow.data();
    widen(pb.v, tok, g, dv, vr);
    for (int64_t c = 0; c < dv; ++c) s.vt[size_t(c * kBwdKeys + t)] = vr[c];
  }
  return {nk, s.kt.data(), s.vt.data()};
}

// Loads rows [r0, r0 + nr) of request i, KV head g: q, dO and lse.
RowTile load_rows(const Problem& pb, int64_t i, int64_t g, int64_t r0, int nr, Scratch& s) {
  const int64_t dq = pb.l.d_qk, dv = pb.l.d_v;
  for (int x = 0; x < nr; ++x) {
    const int64_t tok = pb.token(i, r0 + x), h = pb.head(g, r0 + x);
    widen(pb.q, tok, h, dq, s.q.data() + int64_t(x) * dq);
    widen(pb.dout, tok, h, dv, s.dout.data() + int64_t(x) * dv);
    s.lse[size_t(x)] = pb.lse.ptr<float>()[tok * pb.lse.strides[0] + h * pb.lse.strides[1]];
  }
  return {nr, s.q.data(), s.dout.data(), s.lse.data(), s.vis.data()};
}

// Keys of the tile [k0, k0 + nk) each row of [r0, r0 + nr) may see.
void set_visible(const Problem& pb, int64_t i, int64_t r0, int nr, int64_t k0, int nk, Scratch& s) {
  for (int x = 0; x < nr; ++x) s.vis[size_t(x)] = int(std::clamp<int64_t>(pb.visible(i, r0 + x) - k0, 0, nk));
}

void store(const TensorView& t, int64_t token, int64_t head, const float* row, int64_t n, float factor) {
  const size_t es = t.dtype == DType::kF32 ? 4 : 2;
  char* dst = static_cast<char*>(t.data) + size_t(token * t.strides[0] + head * t.strides[1]) * es;
  store_row(row, n, factor, t.dtype, dst);
}

// Runs body(task, scratch) for tasks [0, n), claimed one at a time by the pool's threads.
template <typename Body>
void run_tasks(const Problem& pb, int64_t n, const Body& body) {
  std::atomic<int64_t> next{0};
  parallel_run([&](int, int) {
    Scratch s(pb);
    for (int64_t t = next.fetch_add(1); t < n; t = next.fetch_add(1)) body(t, s);
  });
}

struct TileTask {
  int64_t i, g, start;  // request, KV head, first key (pass 2) or row (pass 3)
};

void row_pass(Problem& pb) {
  std::vector<TileTask> tasks;
  for (int64_t i = 0; i < pb.l.b; ++i)
    for (int64_t g = 0; g < pb.l.h_kv; ++g)
      for (int64_t r0 = 0; r0 < pb.rows(i); r0 += kBwdRows) tasks.push_back({i, g, r0});
  const int64_t dq = pb.l.d_qk, dv = pb.l.d_v;
  run_tasks(pb, int64_t(tasks.size()), [&](int64_t n, Scratch& s) {
    const TileTask& t = tasks[size_t(n)];
    const int nr = int(std::min<int64_t>(kBwdRows, pb.rows(t.i) - t.start));
    const RowTile rows = load_rows(pb, t.i, t.g, t.start, nr, s);
    float *a = s.acc_a.data(), *b = s.acc_c.data();  // sum P dP K, sum P K
    std::fill(s.acc_a.begin(), s.acc_a.end(), 0.0f);
    std::fill(s.acc_c.begin(), s.acc_c.end(), 0.0f);
    std::fill(s.delta.begin(), s.delta.end(), 0.0f);
    const int64_t last = pb.visible(t.i, t.start + nr - 1);  // the tile's last row sees the most keys
    for (int64_t k0 = 0; k0 < last; k0 += kBwdKeys) {
      const int nk = int(std::min<int64_t>(kBwdKeys, last - k0));
      load_keys(pb, t.i, t.g, k0, nk, true, s);
      set_visible(pb, t.i, t.start, nr, k0, nk, s);
      pb.ks->probs(rows, KeyTile{nk, s.kt.data(), s.vt.data()}, int(dq), int(dv), pb.scale, s.p.data(), s.dp.data());
      for (int x = 0; x < nr; ++x) {
        float* w = s.dp.data() + x * kBwdKeys;
        const float* p = s.p.data() + x * kBwdKeys;
        float sum = s.delta[size_t(x)];
        for (int c = 0; c < nk; ++c) {
          w[c] *= p[c];
          sum += w[c];
        }
        s.delta[size_t(x)] = sum;
      }
      pb.ks->accumulate_rows(s.dp.data(), nr, nk, s.krows.data(), int(dq), a);
      pb.ks->accumulate_rows(s.p.data(), nr, nk, s.krows.data(), int(dq), b);
    }
    for (int x = 0; x < nr; ++x) {
      const int64_t tok = pb.token(t.i, t.start + x), h = pb.head(t.g, t.start + x);
      float delta = s.delta[size_t(x)];
      if (pb.dlse) delta -= pb.dlse->ptr<float>()[tok * pb.dlse->strides[0] + h * pb.dlse->strides[1]];
      pb.delta[size_t(tok * pb.l.h_q + h)] = delta;
      float* ar = a + int64_t(x) * dq;
      const float* br = b + int64_t(x) * dq;
      for (int64_t c = 0; c < dq; ++c) ar[c] -= delta * br[c];  // sum P (dP - delta) K
      store(pb.dq, tok, h, ar, dq, pb.scale);
    }
  });
}

void key_pass(const Problem& pb) {
  std::vector<TileTask> tasks;
  for (int64_t i = 0; i < pb.l.b; ++i)
    for (int64_t g = 0; g < pb.l.h_kv; ++g)
      for (int64_t k0 = 0; k0 < pb.l.kv_len[size_t(i)]; k0 += kBwdKeys) tasks.push_back({i, g, k0});
  const int64_t dq = pb.l.d_qk, dv = pb.l.d_v;
  run_tasks(pb, int64_t(tasks.size()), [&](int64_t n, Scratch& s) {
    const TileTask& t = tasks[size_t(n)];
    const int nk = int(std::min<int64_t>(kBwdKeys, pb.l.kv_len[size_t(t.i)] - t.start));
    const KeyTile keys = load_keys(pb, t.i, t.g, t.start, nk, false, s);
    std::fill(s.acc_a.begin(), s.acc_a.end(), 0.0f);  // dK / scale
    std::fill(s.acc_b.begin(), s.acc_b.end(), 0.0f);  // dV
    // Causal: rows of queries before the first one that sees key `start` see none of this tile.
    const int64_t R = pb.rows(t.i), n_q = pb.l.q_len[size_t(t.i)], n_kv = pb.l.kv_len[size_t(t.i)];
    const int64_t r_begin = pb.causal ? std::clamp<int64_t>(t.start - (n_kv - n_q), 0, n_q) * pb.hp : 0;
    for (int64_t r0 = r_begin; r0 < R; r0 += kBwdRows) {
      const int nr = int(std::min<int64_t>(kBwdRows, R - r0));
      const RowTile rows = load_rows(pb, t.i, t.g, r0, nr, s);
      for (int x = 0; x < nr; ++x)
        s.delta[size_t(x)] = pb.delta[size_t(pb.token(t.i, r0 + x) * pb.l.h_q + pb.head(t.g, r0 + x))];
      set_visible(pb, t.i, r0, nr, t.start, nk, s);
      pb.ks->probs(rows, keys, int(dq), int(dv), pb.scale, s.p.data(), s.dp.data());
      pb.ks->dscores(s.p.data(), nr, s.delta.data(), s.dp.data());
      pb.ks->accumulate_keys(s.p.data(), nr, nk, rows.dout, int(dv), s.acc_b.data());
      pb.ks->accumulate_keys(s.dp.data(), nr, nk, rows.q, int(dq), s.acc_a.data());
    }
    for (int x = 0; x < nk; ++x) {
      const int64_t tok = pb.l.kv_begin[size_t(t.i)] + t.start + x;
      store(pb.dk, tok, t.g, s.acc_a.data() + int64_t(x) * dq, dq, pb.scale);
      store(pb.dv, tok, t.g, s.acc_b.data() + int64_t(x) * dv, dv, 1.0f);
    }
  });
}

}  // namespace

void flash_attn_varlen_bwd(const VarlenInputs& in, const TensorView& out, const TensorView& lse,
                           const TensorView& dout, const TensorView& dq, const TensorView& dk, const TensorView& dv,
                           const TensorView* dlse) {
  Problem pb;
  pb.l = check_varlen_inputs(kFn, in);
  const VarlenLayout& l = pb.l;
  const DType dt = in.q.dtype;
  static const char* const kQDims[] = {"total_q", "num_heads", "head_dim of v"};
  static const char* const kGradQDims[] = {"total_q", "num_heads", "head_dim of q"};
  static const char* const kGradKDims[] = {"total_kv", "num_heads of k", "head_dim of q"};
  static const char* const kGradVDims[] = {"total_kv", "num_heads of k", "head_dim of v"};
  check_varlen_tensor(kFn, "out", out, {dt}, {l.total_q, l.h_q, l.d_v}, kQDims, false, in);
  check_varlen_tensor(kFn, "dout", dout, {dt}, {l.total_q, l.h_q, l.d_v}, kQDims, false, in);
  check_varlen_tensor(kFn, "lse", lse, {DType::kF32}, {l.total_q, l.h_q}, kQDims, false, in);
  if (dlse) check_varlen_tensor(kFn, "dlse", *dlse, {DType::kF32}, {l.total_q, l.h_q}, kQDims, false, in);
  check_varlen_tensor(kFn, "dq", dq, {dt, DType::kF32}, {l.total_q, l.h_q, l.d_qk}, kGradQDims, true, in);
  check_varlen_tensor(kFn, "dk", dk, {dt, DType::kF32}, {l.total_kv, l.h_kv, l.d_qk}, kGradKDims, true, in);
  check_varlen_tensor(kFn, "dv", dv, {dt, DType::kF32}, {l.total_kv, l.h_kv, l.d_v}, kGradVDims, true, in);
  const std::pair<const char*, const TensorView*> grads[] = {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}};
  const std::pair<const char*, const TensorView*> reads[] = {{"out", &out}, {"lse", &lse}, {"dout", &dout}};
  for (const auto& [gn, gt] : grads) {
    for (const auto& [rn, rt] : reads) check_no_overlap(kFn, gn, *gt, rn, *rt);
    if (dlse) check_no_overlap(kFn, gn, *gt, "dlse", *dlse);
    for (const auto& [hn, ht] : grads)
      if (gt != ht) check_no_overlap(kFn, gn, *gt, hn, *ht);
  }

  pb.q = in.q;
  pb.k = in.k;
  pb.v = in.v;
  pb.out = out;
  pb.lse = lse;
  pb.dout = dout;
  pb.dq = dq;
  pb.dk = dk;
  pb.dv = dv;
  pb.dlse = dlse;
  pb.hp = l.h_q / l.h_kv;
  pb.scale = float(l.scale);
  pb.causal = in.causal;
  // fp32 FMA loops: AVX-512 from that level up (bf16 dot products would round P and dS to bf16).
  pb.ks = active_isa() >= Isa::kAvx512 ? &cpu::mla_bwd_kernels_avx512() : &cpu::mla_bwd_kernels_scalar();
  pb.delta.assign(size_t(l.total_q * l.h_q), 0.0f);
  row_pass(pb);
  key_pass(pb);
}

}  // namespace tessera::flash_mla
