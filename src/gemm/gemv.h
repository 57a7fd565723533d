#pragma once

#include "backends/cpu/gemm_kernel_set.h"
#include "gemm/gemm_problem.h"

namespace tessera::gemm {

constexpr int64_t kGemvMaxM = 8;

// nullptr if the decode GEMV applies to p, else the reason it does not.
const char* gemv_refusal(const GemmProblem& p);
void run_gemv(const GemmProblem& p, cpu::GemvFn gemv);
// Independent problems (all passing gemv_refusal) in one parallel region.
void run_gemv_batch(const GemmProblem* problems, int64_t count, cpu::GemvFn gemv);

}  // namespace tessera::gemm
