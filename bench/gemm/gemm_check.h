// The float64 random-vector check of D = A . B^T (BLIS's cheap large-GEMM check): for a random vector
// t, compare D.t with A.(B^T.t). One O(NK) pass builds u = B^T.t once per B; each check is O(MN + MK).
#pragma once

#include <cstdint>
#include <vector>

#include "gemm/gemm_operands.h"

namespace tessera::bench {

class GemmCheck {
 public:
  GemmCheck(const GemmOperand& b, uint64_t seed);

  // Worst over rows m of |sum_n D[m,n] t[n] - sum_k A[m,k] u[k]| / tol_m, where
  // tol_m = tol_ulps * 2^-9 * sqrt(sum_n (D[m,n] t[n])^2): the rounding of each D element to bf16
  // (relative error <= 2^-9) adds a random-walk error of about 2^-9/sqrt(3) times that root sum of
  // squares. A value <= 1 passes; NaN or Inf anywhere gives +inf. d is row-major [M, N], bf16 or f32.
  double error(const GemmOperand& a, const void* d, DType d_type, double tol_ulps) const;

 private:
  int64_t n_, k_;
  std::vector<double> t_;  // [N]
  std::vector<double> u_;  // [K] = B^T t
};

}  // namespace tessera::bench
