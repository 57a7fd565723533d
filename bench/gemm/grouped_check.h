// The float64 random-vector check of a grouped GEMM (GemmCheck per group): for a random vector t,
// compare D[r].t with A[r].(B_g^T.t) for every checked row r of group g. u_g = B_g^T.t is built once
// per B (O(G N K)); each check is O(rows (N + K)).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::bench {

// Writes the k effective values (data * scale) of one row of an operand.
using RowValues = std::function<void(int64_t row, float* out)>;

struct CheckedRow {
  int64_t a_row, d_row, group;
};

class GroupedCheck {
 public:
  // b_row(g * n + j) gives row j of B_g ([N, K]).
  GroupedCheck(int64_t groups, int64_t n, int64_t k, const RowValues& b_row, uint64_t seed);

  // Worst |D.t - A.u_g| / tol over the rows, tol = tol_ulps * 2^-9 * |D.t terms|_2 (see GemmCheck).
  // d is bf16 with row stride ldd elements. <= 1 passes; NaN or Inf gives +inf.
  double error(const RowValues& a_row, const std::vector<CheckedRow>& rows, const uint16_t* d, int64_t ldd,
               double tol_ulps) const;

 private:
  int64_t groups_, n_, k_;
  std::vector<double> t_;  // [N]
  std::vector<double> u_;  // [G, K]
};

}  // namespace tessera::bench
