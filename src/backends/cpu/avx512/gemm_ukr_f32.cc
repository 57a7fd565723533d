// The avx512 GEMM micro-kernels: gemm_ukr_f32-inl.h on 16-lane zmm vectors. Two tiles are offered, the
// same shapes as the avx512bf16 set: 8 x 48 (24 accumulators) and 14 x 32 (28 accumulators); the plan
// picks the one that pads least. Two FMA pipes with 4-cycle latency need >= 8 independent chains;
// 24-28 leave room for the loads.
// Both tiles run close to peak in L1 and over a 256 x 512 block.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include "backends/cpu/avx512/f32_vec.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemm_ukr_f32-inl.h"

namespace tessera::cpu {

void gemm_ukr_avx512_8x48(const UkrArgs& p) {
  ukr_f32<Avx512F32, 8, 3>(p);
}
void gemm_ukr_avx512_14x32(const UkrArgs& p) {
  ukr_f32<Avx512F32, 14, 2>(p);
}

}  // namespace tessera::cpu
