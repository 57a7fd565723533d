// Peak fp32 FMA rate on 512-bit registers: vfmadd231ps on 24 independent zmm accumulators, all operands
// in registers. 24 covers latency x throughput (4 cycles x 2 per cycle needs >= 8) with margin.
// acc = acc * x + y with x < 1 converges to y / (1 - x): values stay normal however long the loop runs.
#include <immintrin.h>

#include "backends/cpu/peak_kernels.h"

namespace tessera::cpu {
namespace {

constexpr int kAcc = 24;

double f32_fma_loop(int64_t iters, float* sink) {
  // Operands come from *sink (a run-time value) so the compiler cannot fold the loop away.
  const float seed = *static_cast<volatile float*>(sink);
  const __m512 x = _mm512_set1_ps(0.999f + seed * 1e-9f), y = _mm512_set1_ps(1e-3f);
  __m512 acc[kAcc];
#pragma GCC unroll 24
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_set1_ps(seed + float(j));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_fmadd_ps(acc[j], x, y);
  }
  __m512 total = acc[0];
  for (int j = 1; j < kAcc; ++j) total = _mm512_add_ps(total, acc[j]);
  *sink = _mm512_reduce_add_ps(total);
  return double(iters) * kAcc * 16 * 2;
}

}  // namespace

ComputePeakFn peak_f32_fma_avx512() {
  return f32_fma_loop;
}

}  // namespace tessera::cpu
