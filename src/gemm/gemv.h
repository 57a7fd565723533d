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
// The e4m3 activations of p times their power-of-two scales, as bf16 rows of K values, for the FP4 GEMV's
// activation scale groups narrower than its 128-value steps. Exact; p must pass folds_activation_scales
// (gemv.cc): per-32 UE8M0 scales 2^e with -117 <= e <= 119.
std::vector<uint16_t> fold_activations(const GemmProblem& p);

// Independent problems (all passing gemv_refusal) in one parallel region.
void run_gemv_batch(const GemmProblem* problems, int64_t count, cpu::GemvFn gemv);

}  // namespace tessera::gemm
