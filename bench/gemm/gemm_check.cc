#include "gemm/gemm_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tessera/core/thread_pool.h"

namespace tessera::bench {
namespace {

double uniform_pm1(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return double((z ^ (z >> 31)) >> 11) * 0x1p-52 - 1.0;
}

double d_value(const void* d, DType type, size_t i) {
  if (type == DType::kF32) return static_cast<const float*>(d)[i];
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(d) + 2 * i, 2);
  return bf16_to_f32(h);
}

}  // namespace

GemmCheck::GemmCheck(const GemmOperand& b, uint64_t seed)
    : n_(b.rows), k_(b.cols), t_(size_t(b.rows)), u_(size_t(b.cols), 0.0) {
  uint64_t state = seed;
  for (double& v : t_) v = uniform_pm1(&state);
  // Each thread sums its rows of B into a partial u; partials are added in thread order.
  std::vector<std::vector<double>> partial(static_cast<size_t>(num_threads()));
  parallel_run([&](int tid, int nt) {
    std::vector<double> acc(static_cast<size_t>(k_), 0.0);
    std::vector<float> row(static_cast<size_t>(k_));
    const int64_t r0 = n_ * tid / nt, r1 = n_ * (tid + 1) / nt;
    for (int64_t r = r0; r < r1; ++r) {
      b.row_values(r, row.data());
      for (int64_t c = 0; c < k_; ++c) acc[size_t(c)] += double(row[size_t(c)]) * t_[size_t(r)];
    }
    partial[size_t(tid)] = std::move(acc);
  });
  for (const auto& p : partial)
    for (size_t c = 0; c < p.size(); ++c) u_[c] += p[c];
}

double GemmCheck::error(const GemmOperand& a, const void* d, DType d_type, double tol_ulps) const {
  std::vector<double> worst(static_cast<size_t>(a.rows), 0.0);
  parallel_for(a.rows, [&](int64_t m0, int64_t m1) {
    std::vector<float> row(static_cast<size_t>(k_));
    for (int64_t m = m0; m < m1; ++m) {
      a.row_values(m, row.data());
      double dt = 0, sq = 0, ref = 0;
      for (int64_t n = 0; n < n_; ++n) {
        const double term = d_value(d, d_type, size_t(m * n_ + n)) * t_[size_t(n)];
        dt += term;
        sq += term * term;
      }
      for (int64_t c = 0; c < k_; ++c) ref += double(row[size_t(c)]) * u_[size_t(c)];
      const double tol = tol_ulps * 0x1p-9 * std::sqrt(sq) + 1e-30;
      const double e = std::fabs(dt - ref) / tol;
      worst[size_t(m)] = std::isfinite(e) ? e : std::numeric_limits<double>::infinity();
    }
  });
  return *std::max_element(worst.begin(), worst.end());
}

}  // namespace tessera::bench
