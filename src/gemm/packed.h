// The packed (BLIS-style) GEMM driver over one kernel set.
#pragma once

#include "backends/cpu/gemm_kernel_set.h"
#include "gemm/gemm_problem.h"

namespace tessera::gemm {

// Requires ks.accepts() for both operand types and, when scaled, p.group % ks.k_align == 0 and
// p.sb / p.sa padded so kernels may read scales for up to nr columns past the end (see scales.h).
void run_packed(const GemmProblem& p, const cpu::GemmKernelSet& ks);
// Runs independent problems (same kernel set) in one parallel region: threads take equal shares of the
// total work, so many small problems (MoE groups) keep every thread busy.
void run_packed_batch(const GemmProblem* problems, int64_t count, const cpu::GemmKernelSet& ks);

}  // namespace tessera::gemm
