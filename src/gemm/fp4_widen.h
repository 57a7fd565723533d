// Exact widening of packed FP4 (e2m1) GEMM operands to float8_e4m3fn for kernel sets without FP4 input.
#pragma once

#include <cstdint>
#include <vector>

#include "gemm/gemm_problem.h"

namespace tessera::gemm {

// Returns p with every kE2M1 operand replaced by an e4m3 copy (row-major [rows, K]) stored in `storage`,
// which must outlive the problem's run. Every e2m1 value is an e4m3 value, and the scale tables are
// untouched, so the product is unchanged; only kernels that accept e4m3 but not e2m1 need this.
GemmProblem widen_fp4_operands(const GemmProblem& p, std::vector<std::vector<uint8_t>>* storage);

}  // namespace tessera::gemm
