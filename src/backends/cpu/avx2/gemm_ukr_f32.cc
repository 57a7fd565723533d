// The avx2 GEMM micro-kernel: gemm_ukr_f32-inl.h on 8-lane ymm vectors, one 6 x 16 tile.
// 12 accumulators + 2 b vectors + 1 broadcast use 15 of the 16 ymm registers, and 12 independent
// chains cover two FMA pipes with 4-cycle latency.
// It runs close to the ymm peak with panels in L1 or over a 256 x 512 block.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include "backends/cpu/avx2/f32_vec.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemm_ukr_f32-inl.h"

namespace tessera::cpu {

void gemm_ukr_avx2_6x16(const UkrArgs& p) {
  ukr_f32<Avx2F32, 6, 2>(p);
}

}  // namespace tessera::cpu
