// Dispatch smoke: MQA logits (prefill and paged decode, FP8 with per-token scales) and FlashMLA (dense
// bf16 decode, sparse FP8 decode over both cache layouts, sparse prefill, the dense MHA prefill backward)
// once each at this CPU's own level on small problems, each against a float64 reference (see
// gemm_smoke_test.cc for why).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention/mla_harness.h"
#include "smoke_util.h"
#include "tessera/mqa_logits.h"

namespace tessera::test::smoke {
namespace {

constexpr int64_t kHeads = 8, kDim = 128;

// FP8 indexer inputs: q [queries, H, D], k [keys, D] with one fp32 scale per key, weights [queries, H].
struct MqaInputs {
  std::vector<uint8_t> q, k;
  std::vector<double> qv, kv;
  std::vector<float> k_scale, weights;
};

MqaInputs mqa_inputs(Rng& rng, int64_t queries, int64_t keys) {
  MqaInputs in;
  in.q = random_e4m3(rng, queries * kHeads * kDim, &in.qv);
  in.k = random_e4m3(rng, keys * kDim, &in.kv);
  for (int64_t j = 0; j < keys; ++j) in.k_scale.push_back(float(rng.uniform(0.01, 0.1)));
  for (int64_t i = 0; i < queries * kHeads; ++i) in.weights.push_back(float(rng.normal()));
  return in;
}

// logit[i, j] = sum_h w[i, h] * relu((q[i, h] . k[j]) * k_scale[j]).
double mqa_logit(const MqaInputs& in, int64_t i, int64_t j) {
  double logit = 0;
  for (int64_t h = 0; h < kHeads; ++h) {
    double dot = 0;
    for (int64_t d = 0; d < kDim; ++d) dot += in.qv[size_t((i * kHeads + h) * kDim + d)] * in.kv[size_t(j * kDim + d)];
    logit += in.weights[size_t(i * kHeads + h)] * std::max(dot * in.k_scale[size_t(j)], 0.0);
  }
  return logit;
}

TEST(DispatchSmoke, MqaLogitsPrefill) {
  Rng rng(5);
  const int64_t s = 6, s_kv = 70;
  MqaInputs in = mqa_inputs(rng, s, s_kv);
  std::vector<int32_t> ks(static_cast<size_t>(s)), ke(static_cast<size_t>(s));
  for (int64_t i = 0; i < s; ++i) ks[size_t(i)] = int32_t(i), ke[size_t(i)] = int32_t(s_kv - s + i + 1);
  std::vector<float> logits(size_t(s * s_kv), 0.0f);
  attention::fp8_fp4_mqa_logits(
      TensorView(in.q.data(), DType::kF8E4M3, {s, kHeads, kDim}), nullptr,
      TensorView(in.k.data(), DType::kF8E4M3, {s_kv, kDim}), TensorView(in.k_scale.data(), DType::kF32, {s_kv}),
      TensorView(in.weights.data(), DType::kF32, {s, kHeads}), TensorView(ks.data(), DType::kI32, {s}),
      TensorView(ke.data(), DType::kI32, {s}), TensorView(logits.data(), DType::kF32, {s, s_kv}), true, 0);
  std::vector<double> got, ref;
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s_kv; ++j) {
      const bool inside = j >= ks[size_t(i)] && j < ke[size_t(i)];
      if (!inside) {
        ASSERT_EQ(logits[size_t(i * s_kv + j)], -INFINITY) << "(" << i << ", " << j << ") outside its range";
        continue;
      }
      got.push_back(logits[size_t(i * s_kv + j)]);
      ref.push_back(mqa_logit(in, i, j));
    }
  EXPECT_TRUE(close_to("fp8_fp4_mqa_logits", got, ref, 1e-4));
}

TEST(DispatchSmoke, MqaLogitsPaged) {
  Rng rng(6);
  const int64_t batch = 2, block_kv = 64, pages = 2, ctx = pages * block_kv, num_blocks = batch * pages;
  std::vector<int32_t> lens = {int32_t(ctx), 77};
  MqaInputs in = mqa_inputs(rng, batch, batch * ctx);  // request b's keys: rows [b * ctx, (b+1) * ctx)
  // Pages in reverse order, so a kernel ignoring the block table reads the wrong keys.
  std::vector<int32_t> table(size_t(batch * pages));
  for (int64_t p = 0; p < num_blocks; ++p) table[size_t(p)] = int32_t(num_blocks - 1 - p);
  const int64_t page_bytes = block_kv * (kDim + 4);
  std::vector<uint8_t> cache(size_t(num_blocks * page_bytes));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < ctx; ++t) {
      uint8_t* page = cache.data() + table[size_t(b * pages + t / block_kv)] * page_bytes;
      std::memcpy(page + (t % block_kv) * kDim, in.k.data() + (b * ctx + t) * kDim, kDim);
      std::memcpy(page + block_kv * kDim + (t % block_kv) * 4, &in.k_scale[size_t(b * ctx + t)], 4);
    }
  const int sms = 3;
  std::vector<int32_t> meta(size_t(2 * (sms + 1)));
  const TensorView lens_view(lens.data(), DType::kI32, {batch, 1});
  attention::get_paged_mqa_logits_metadata(lens_view, int(block_kv), sms,
                                           TensorView(meta.data(), DType::kI32, {sms + 1, 2}));
  std::vector<float> logits(size_t(batch * ctx), 0.0f);
  attention::fp8_fp4_paged_mqa_logits(TensorView(in.q.data(), DType::kF8E4M3, {batch, 1, kHeads, kDim}), nullptr,
                                      TensorView(cache.data(), DType::kU8, {num_blocks, block_kv, 1, kDim + 4}),
                                      TensorView(in.weights.data(), DType::kF32, {batch, kHeads}), lens_view,
                                      TensorView(table.data(), DType::kI32, {batch, pages}),
                                      TensorView(meta.data(), DType::kI32, {sms + 1, 2}),
                                      TensorView(logits.data(), DType::kF32, {batch, ctx}), ctx, true);
  std::vector<double> got, ref;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < ctx; ++t) {
      if (t >= lens[size_t(b)]) {
        ASSERT_EQ(logits[size_t(b * ctx + t)], -INFINITY) << "request " << b << " position " << t;
        continue;
      }
      got.push_back(logits[size_t(b * ctx + t)]);
      ref.push_back(mqa_logit(in, b, b * ctx + t));
    }
  EXPECT_TRUE(close_to("fp8_fp4_paged_mqa_logits", got, ref, 1e-4));
}

TEST(DispatchSmoke, FlashMlaDenseDecode) {
  Rng rng(7);
  DenseProblem p;
  p.b = 2;
  p.h_q = 16;
  p.lens = {300, 129};
  p.build(rng);
  flash_mla::SchedMeta meta;
  flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
  EXPECT_TRUE(p.check());
}

TEST(DispatchSmoke, FlashMlaSparseDecode) {
  Rng rng(8);
  for (flash_mla::KvCacheLayout layout : {flash_mla::KvCacheLayout::kV32, flash_mla::KvCacheLayout::kModel1}) {
    SparseProblem p;
    p.layout = layout;
    p.h_q = 64;
    p.topk = 128;
    p.short_lists = true;  // about 100 valid tokens: allow the documented bound of bf16 p (mla_harness.h)
    p.build(rng);
    flash_mla::SchedMeta meta;
    flash_mla::flash_mla_with_kvcache(p.inputs(), meta, p.out.view, p.lse.view);
    EXPECT_TRUE(p.check()) << (layout == flash_mla::KvCacheLayout::kV32 ? "V32" : "MODEL1");
  }
}

TEST(DispatchSmoke, FlashMlaSparsePrefill) {
  Rng rng(9);
  PrefillProblem p;
  p.s_q = 2;
  p.s_kv = 400;
  p.h_q = 64;
  p.topk = 256;
  p.short_lists = true;  // about 200 valid tokens per query: as above
  p.build(rng);
  flash_mla::flash_mla_sparse_fwd(p.inputs(), p.out.view, p.max_logits.view, p.lse.view);
  EXPECT_TRUE(p.check());
}

// flash_attn_varlen_bwd, causal GQA (2 query heads per KV head) with tile tails: gradients against float64.
TEST(DispatchSmoke, FmhaBackward) {
  Rng rng(9);
  const int64_t n_q = 70, n_kv = 90, h_q = 2, h_kv = 1, d_qk = 72, d_v = 40;
  Buffer q = make_buffer(DType::kBF16, {n_q, h_q, d_qk}), k = make_buffer(DType::kBF16, {n_kv, h_kv, d_qk}),
         v = make_buffer(DType::kBF16, {n_kv, h_kv, d_v}), dout = make_buffer(DType::kBF16, {n_q, h_q, d_v});
  for (Buffer* b : {&q, &k, &v, &dout}) fill_normal(b, rng);
  Buffer out = make_buffer(DType::kBF16, {n_q, h_q, d_v}), lse = make_buffer(DType::kF32, {n_q, h_q});
  Buffer dq = make_buffer(DType::kF32, {n_q, h_q, d_qk}), dk = make_buffer(DType::kF32, {n_kv, h_kv, d_qk}),
         dv = make_buffer(DType::kF32, {n_kv, h_kv, d_v});
  std::vector<int32_t> cu_q = {0, int32_t(n_q)}, cu_kv = {0, int32_t(n_kv)};
  flash_mla::VarlenInputs in;
  in.q = q.view;
  in.k = k.view;
  in.v = v.view;
  in.cu_seqlens_qo = TensorView(cu_q.data(), DType::kI32, {2});
  in.cu_seqlens_kv = TensorView(cu_kv.data(), DType::kI32, {2});
  in.max_seqlen_qo = n_q;
  in.max_seqlen_kv = n_kv;
  in.causal = true;
  flash_mla::flash_attn_varlen_fwd(in, out.view, lse.view);
  flash_mla::flash_attn_varlen_bwd(in, out.view, lse.view, dout.view, dq.view, dk.view, dv.view);

  const std::vector<double> qd = to_doubles(q), kd = to_doubles(k), vd = to_doubles(v), od = to_doubles(dout);
  std::vector<double> gq(qd.size(), 0.0), gk(kd.size(), 0.0), gv(vd.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(d_qk));
  for (int64_t j = 0; j < n_q; ++j)
    for (int64_t h = 0; h < h_q; ++h) {
      const int64_t seen = n_kv - n_q + j + 1, row = j * h_q + h;
      std::vector<double> p(static_cast<size_t>(seen)), dp(static_cast<size_t>(seen));
      double mx = -INFINITY, sum = 0, delta = 0;
      for (int64_t t = 0; t < seen; ++t) {
        double s = 0, d = 0;
        for (int64_t c = 0; c < d_qk; ++c) s += qd[size_t(row * d_qk + c)] * kd[size_t(t * d_qk + c)];
        for (int64_t c = 0; c < d_v; ++c) d += od[size_t(row * d_v + c)] * vd[size_t(t * d_v + c)];
        p[size_t(t)] = s * scale;
        dp[size_t(t)] = d;
        mx = std::max(mx, p[size_t(t)]);
      }
      for (int64_t t = 0; t < seen; ++t) sum += std::exp(p[size_t(t)] - mx);
      for (int64_t t = 0; t < seen; ++t) delta += (p[size_t(t)] = std::exp(p[size_t(t)] - mx) / sum) * dp[size_t(t)];
      for (int64_t t = 0; t < seen; ++t) {
        const double ds = p[size_t(t)] * (dp[size_t(t)] - delta) * scale;
        for (int64_t c = 0; c < d_qk; ++c) {
          gq[size_t(row * d_qk + c)] += ds * kd[size_t(t * d_qk + c)];
          gk[size_t(t * d_qk + c)] += ds * qd[size_t(row * d_qk + c)];
        }
        for (int64_t c = 0; c < d_v; ++c) gv[size_t(t * d_v + c)] += p[size_t(t)] * od[size_t(row * d_v + c)];
      }
    }
  // bf16 operands at the amx and avx512bf16 levels: well inside 1% of the largest gradient.
  EXPECT_TRUE(close_to("flash_attn_varlen_bwd dq", to_doubles(dq), gq, 1e-2));
  EXPECT_TRUE(close_to("flash_attn_varlen_bwd dk", to_doubles(dk), gk, 1e-2));
  EXPECT_TRUE(close_to("flash_attn_varlen_bwd dv", to_doubles(dv), gv, 1e-2));
}

}  // namespace
}  // namespace tessera::test::smoke
