// fmha_bwd_ceiling.h: the five products of one head through tessera::gemm's public bf16 entry point.
#include "attention/fmha_bwd_ceiling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "random_fill.h"
#include "tessera/core/dtype.h"
#include "tessera/gemm.h"
#include "timing.h"

namespace tessera::bench {
namespace {

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

}  // namespace

double fmha_bwd_gemm_ceiling_gflops(int seq, int d_qk, int d_v) {
  // Operands (contents do not matter to the rate), transposed ones stored transposed.
  Matrix q(seq, d_qk, 11), k(seq, d_qk, 12), v(seq, d_v, 13), dout(seq, d_v, 14), qt(d_qk, seq, 15), kt(d_qk, seq, 16),
      dout_t(d_v, seq, 17);
  Matrix s(seq, seq, 18), dp(seq, seq, 19), pt(seq, seq, 20), dst(seq, seq, 21);  // S, dP out; P^T, dS^T in
  Matrix dq(seq, d_qk, 22), dk(seq, d_qk, 23), dv(seq, d_v, 24);
  auto five = [&](int64_t) {
    gemm::bf16_gemm_nt(q.view, k.view, s.view);
    gemm::bf16_gemm_nt(dout.view, v.view, dp.view);
    gemm::bf16_gemm_nt(pt.view, dout_t.view, dv.view);
    gemm::bf16_gemm_nt(dst.view, qt.view, dk.view);
    gemm::bf16_gemm_nt(s.view, kt.view, dq.view);  // dS as seq x seq, K-major
  };
  // A ceiling is the best rate: the fastest of three short medians (a neighbour on a shared host can slow
  // any one of them).
  double ms = INFINITY;
  for (int round = 0; round < 3; ++round) ms = std::min(ms, time_median(five, 0.1, 3).median_ms);
  const double counted = 2.5 * 2.0 * seq * double(seq) * (d_qk + d_v);
  return counted / (ms * 1e-3) * 1e-9;
}

}  // namespace tessera::bench
