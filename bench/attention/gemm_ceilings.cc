// gemm_ceilings.h: the attention rows' products through tessera::gemm's public bf16 entry point and
// through oneDNN's matmul.
#include "attention/gemm_ceilings.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "peers/onednn_matmul.h"
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

// A row's products D = A . B^T (B given [N, K]), each operand its own matrix, and their counted flops.
class Products {
 public:
  explicit Products(double flops) : flops_(flops) {}
  // Adds D[m, n] = A[m, k] . B[n, k]^T on fresh operands.
  void add(int m, int n, int k) {
    const uint64_t seed = 3 * matrices_.size() + 11;
    matrices_.emplace_back(m, k, seed);
    matrices_.emplace_back(n, k, seed + 1);
    matrices_.emplace_back(m, n, seed + 2);
  }

  GemmCeilings measure() {
    GemmCeilings c;
    c.tessera_gflops = best_rate([&](int64_t) {
      for (size_t i = 0; i < matrices_.size(); i += 3) gemm::bf16_gemm_nt(a(i).view, b(i).view, d(i).view);
    });
    c.onednn_gflops = onednn_rate();
    return c;
  }

 private:
  Matrix& a(size_t i) { return matrices_[i]; }
  Matrix& b(size_t i) { return matrices_[i + 1]; }
  Matrix& d(size_t i) { return matrices_[i + 2]; }

  // flops over the fastest of three short medians of `products` (a neighbour on a shared host can slow
  // any one of them; a ceiling is the best rate), in GFLOP/s.
  double best_rate(const std::function<void(int64_t)>& products) const {
    double ms = INFINITY;
    for (int round = 0; round < 3; ++round) ms = std::min(ms, time_median(products, 0.1, 3).median_ms);
    return flops_ / (ms * 1e-3) * 1e-9;
  }

  double onednn_rate() {
    if (!OnednnMatmul::available()) return NAN;
    try {
      std::vector<std::unique_ptr<OnednnMatmul>> matmuls;
      for (size_t i = 0; i < matrices_.size(); i += 3)
        matmuls.push_back(std::make_unique<OnednnMatmul>(a(i).view.size(0), b(i).view.size(0), a(i).view.size(1)));
      return best_rate([&](int64_t) {
        for (size_t i = 0; i < matrices_.size(); i += 3)
          matmuls[i / 3]->run(a(i).data.data(), b(i).data.data(), d(i).data.data());
      });
    } catch (const std::exception&) {
      return NAN;
    }
  }

  double flops_;
  std::deque<Matrix> matrices_;  // a, b, d of each product in turn (a deque: views stay valid)
};

}  // namespace

GemmCeilings fmha_bwd_gemm_ceilings(int seq, int d_qk, int d_v) {
  Products p(2.5 * 2.0 * seq * double(seq) * (d_qk + d_v));
  p.add(seq, seq, d_qk);  // S = Q K^T
  p.add(seq, seq, d_v);   // dP = dO V^T
  p.add(seq, d_v, seq);   // dV = P^T dO (dO^T given K-major)
  p.add(seq, d_qk, seq);  // dK = dS^T Q
  p.add(seq, d_qk, seq);  // dQ = dS K
  return p.measure();
}

GemmCeilings mla_gemm_ceilings(int rows, int tokens, int d_qk) {
  constexpr int kDv = 512;
  Products p(2.0 * rows * double(tokens) * (d_qk + kDv));
  p.add(rows, tokens, d_qk);  // S = Q K^T
  p.add(rows, kDv, tokens);   // O = P V (V^T given K-major)
  return p.measure();
}

}  // namespace tessera::bench
