// Peak fp32 FMA rate on 256-bit registers: peak_loop-inl.h's vfmadd231ps loop on 14 independent ymm
// accumulators. AVX2 has 16 ymm registers; 14 accumulators + 2 operands keep the loop register-only,
// and 14 still covers latency x throughput (4-5 cycles x 2 per cycle on Haswell through Zen 4 needs 8-10).
#include "backends/cpu/avx2/f32_vec.h"
#include "backends/cpu/peak_kernels.h"
#include "backends/cpu/peak_loop-inl.h"

namespace tessera::cpu {

ComputePeakFn peak_f32_fma_avx2() {
  return peak_loop<Avx2F32, FmaStep<Avx2F32>, 14>;
}

}  // namespace tessera::cpu
