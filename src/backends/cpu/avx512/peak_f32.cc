// Peak fp32 FMA rate on 512-bit registers: peak_loop-inl.h's vfmadd231ps loop on 24 independent zmm
// accumulators. 24 covers latency x throughput (4 cycles x 2 per cycle needs >= 8) with margin.
#include "backends/cpu/avx512/f32_vec.h"
#include "backends/cpu/peak_kernels.h"
#include "backends/cpu/peak_loop-inl.h"

namespace tessera::cpu {

ComputePeakFn peak_f32_fma_avx512() {
  return peak_loop<Avx512F32, FmaStep<Avx512F32>, 24>;
}

}  // namespace tessera::cpu
