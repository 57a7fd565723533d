#pragma once

#include <vector>

#include "backends/cpu/gemm_kernel_set.h"
#include "gemm/gemm_problem.h"

namespace tessera::gemm {

constexpr int64_t kGemvMaxM = 8;

// nullptr if the decode GEMV applies to p, else the reason it does not.
const char* gemv_refusal(const GemmProblem& p);
void run_gemv(const GemmProblem& p, cpu::GemvFn gemv);
// FP4 weights with packed UE8M0 per-32 scales (applied to fp32 block sums): nullptr if the FP4 GEMV
// applies, else why not. The batch returns the problems whose scale exponents were out of the kernel's
// range (their outputs must be recomputed another way).
const char* gemv_fp4_refusal(const GemmProblem& p);
std::vector<GemmProblem> run_gemv_fp4_batch(const GemmProblem* problems, int64_t count, cpu::GemvFp4Fn gemv);

// Independent problems (all passing gemv_refusal) in one parallel region.
void run_gemv_batch(const GemmProblem* problems, int64_t count, cpu::GemvFn gemv);

}  // namespace tessera::gemm
