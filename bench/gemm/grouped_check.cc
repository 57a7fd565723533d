#include "gemm/grouped_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/core/dtype.h"
#include "tessera/core/thread_pool.h"

namespace tessera::bench {
namespace {

double uniform_pm1(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return double((z ^ (z >> 31)) >> 11) * 0x1p-52 - 1.0;
}

}  // namespace

GroupedCheck::GroupedCheck(int64_t groups, int64_t n, int64_t k, const RowValues& b_row, uint64_t seed)
    : groups_(groups), n_(n), k_(k), t_(size_t(n)), u_(size_t(groups * k), 0.0) {
  uint64_t state = seed;
  for (double& v : t_) v = uniform_pm1(&state);
  // One group per work item: each u_g is summed over its rows in order (thread-count independent).
  parallel_for(groups, [&](int64_t g0, int64_t g1) {
    std::vector<float> row(static_cast<size_t>(k_));
    for (int64_t g = g0; g < g1; ++g) {
      double* u = u_.data() + g * k_;
      for (int64_t j = 0; j < n_; ++j) {
        b_row(g * n_ + j, row.data());
        for (int64_t c = 0; c < k_; ++c) u[c] += double(row[size_t(c)]) * t_[size_t(j)];
      }
    }
  });
}

double GroupedCheck::error(const RowValues& a_row, const std::vector<CheckedRow>& rows, const uint16_t* d, int64_t ldd,
                           double tol_ulps) const {
  std::vector<double> worst(rows.size(), 0.0);
  parallel_for(int64_t(rows.size()), [&](int64_t i0, int64_t i1) {
    std::vector<float> row(static_cast<size_t>(k_));
    for (int64_t i = i0; i < i1; ++i) {
      const CheckedRow& cr = rows[size_t(i)];
      a_row(cr.a_row, row.data());
      const double* u = u_.data() + cr.group * k_;
      double dt = 0, sq = 0, ref = 0;
      for (int64_t j = 0; j < n_; ++j) {
        const double term = double(bf16_to_f32(d[cr.d_row * ldd + j])) * t_[size_t(j)];
        dt += term;
        sq += term * term;
      }
      for (int64_t c = 0; c < k_; ++c) ref += double(row[size_t(c)]) * u[c];
      const double e = std::fabs(dt - ref) / (tol_ulps * 0x1p-9 * std::sqrt(sq) + 1e-30);
      worst[size_t(i)] = std::isfinite(e) ? e : std::numeric_limits<double>::infinity();
    }
  });
  return worst.empty() ? 0.0 : *std::max_element(worst.begin(), worst.end());
}

}  // namespace tessera::bench
