// gemm_ceilings.h: the attention rows' products through tessera::gemm's public bf16 entry point.
#include "attention/gemm_ceilings.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "random_fill.h"
#include "tessera/core/dtype.h"
#include "tessera/gemm.h"
#include "timing.h"

namespace tessera::bench {
namespace {

// A bf16 operand of random values (contents do not matter to the rate).
struct Matrix {
  std::vector<uint16_t> data;
  TensorView view;
  Matrix(int rows, int cols, uint64_t seed) : data(size_t(rows) * size_t(cols)) {
    for_random_normal_blocks(rows, cols, 64, seed, [&](int64_t r0, int64_t n, const float* vals) {
      for (int64_t i = 0; i < n * cols; ++i) data[size_t(r0 * cols + i)] = f32_to_bf16(vals[i]);
    });
    view = TensorView(data.data(), DType::kBF16, {rows, cols});
  }
};

// `flops` over the fastest of three short medians of `products` (a neighbour on a shared host can slow
// any one of them; a ceiling is the best rate), in GFLOP/s.
double best_rate(double flops, const std::function<void(int64_t)>& products) {
  double ms = INFINITY;
  for (int round = 0; round < 3; ++round) ms = std::min(ms, time_median(products, 0.1, 3).median_ms);
  return flops / (ms * 1e-3) * 1e-9;
}

}  // namespace

double fmha_bwd_gemm_ceiling_gflops(int seq, int d_qk, int d_v) {
  Matrix q(seq, d_qk, 11), k(seq, d_qk, 12), v(seq, d_v, 13), dout(seq, d_v, 14), qt(d_qk, seq, 15), kt(d_qk, seq, 16),
      dout_t(d_v, seq, 17);
  Matrix s(seq, seq, 18), dp(seq, seq, 19), pt(seq, seq, 20), dst(seq, seq, 21);  // S, dP out; P^T, dS^T in
  Matrix dq(seq, d_qk, 22), dk(seq, d_qk, 23), dv(seq, d_v, 24);
  const double counted = 2.5 * 2.0 * seq * double(seq) * (d_qk + d_v);
  return best_rate(counted, [&](int64_t) {
    gemm::bf16_gemm_nt(q.view, k.view, s.view);
    gemm::bf16_gemm_nt(dout.view, v.view, dp.view);
    gemm::bf16_gemm_nt(pt.view, dout_t.view, dv.view);
    gemm::bf16_gemm_nt(dst.view, qt.view, dk.view);
    gemm::bf16_gemm_nt(s.view, kt.view, dq.view);  // dS as seq x seq, K-major
  });
}

double mla_gemm_ceiling_gflops(int rows, int tokens, int d_qk) {
  constexpr int kDv = 512;
  Matrix q(rows, d_qk, 31), k(tokens, d_qk, 32), v_t(kDv, tokens, 33), s(rows, tokens, 34), p(rows, tokens, 35),
      o(rows, kDv, 36);
  return best_rate(2.0 * rows * double(tokens) * (d_qk + kDv), [&](int64_t) {
    gemm::bf16_gemm_nt(q.view, k.view, s.view);
    gemm::bf16_gemm_nt(p.view, v_t.view, o.view);
  });
}

}  // namespace tessera::bench
