// The neon GEMM micro-kernel: gemm_ukr_f32-inl.h on 4-lane q registers, one 5 x 16 tile.
// Register budget (AArch64 has 32 vector registers): GCC turns the template's broadcast of each row's
// a-value into a scalar load and a by-element FMLA (no dup, no vector-pipe work for the broadcast), so
// every row's a-value occupies its own register: accumulators M*NV + b vectors NV + a-values M <= 32.
//   5 x 16: 5*4 + 4 + 5 = 29 (no spills in the compiled K loop; 20 FMAs per 4 + 5 loads)
//   6 x 12: 6*3 + 3 + 6 = 27 (no spills; 18 FMAs per 9 loads)
//   8 x 12: 8*3 + 3 + 8 = 35 (spills: 15 stack accesses per two K values in the compiled loop)
// 20 independent accumulator chains cover 4 FMA pipes x 4 cycles of latency (16 needed).
// Per-step estimate on Neoverse V1/V2: docs/cpu.md, section ARM64.
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemm_ukr_f32-inl.h"
#include "backends/cpu/neon/f32_vec.h"

namespace tessera::cpu {

void gemm_ukr_neon_5x16(const UkrArgs& p) {
  ukr_f32<NeonF32, 5, 4>(p);
}

}  // namespace tessera::cpu
