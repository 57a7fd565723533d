// mla_ceiling.h: one query group's two products through tessera::gemm's public bf16 entry point.
#include "attention/mla_ceiling.h"

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

constexpr int kDv = 512;

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

double mla_gemm_ceiling_gflops(int rows, int tokens, int d_qk) {
  // Operands (contents do not matter to the rate); V stored transposed.
  Matrix q(rows, d_qk, 31), k(tokens, d_qk, 32), v_t(kDv, tokens, 33), s(rows, tokens, 34), p(rows, tokens, 35),
      o(rows, kDv, 36);
  auto both = [&](int64_t) {
    gemm::bf16_gemm_nt(q.view, k.view, s.view);
    gemm::bf16_gemm_nt(p.view, v_t.view, o.view);
  };
  // A ceiling is the best rate: the fastest of three short medians (a neighbour on a shared host can slow
  // any one of them).
  double ms = INFINITY;
  for (int round = 0; round < 3; ++round) ms = std::min(ms, time_median(both, 0.1, 3).median_ms);
  const double flops = 2.0 * rows * double(tokens) * (d_qk + kDv);
  return flops / (ms * 1e-3) * 1e-9;
}

}  // namespace tessera::bench
