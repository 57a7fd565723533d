// Peak fp32 FMA rate on 256-bit registers: vfmadd231ps on 14 independent ymm accumulators. AVX2 has
// 16 ymm registers; 14 accumulators + 2 operands keep the loop register-only, and 14 still covers
// latency x throughput (4-5 cycles x 2 per cycle on Haswell through Zen 4 needs 8-10).
// acc = acc * x + y with x < 1 converges to y / (1 - x): values stay normal however long the loop runs.
#include <immintrin.h>

#include "backends/cpu/peak_kernels.h"

namespace tessera::cpu {
namespace {

constexpr int kAcc = 14;

double f32_fma_loop(int64_t iters, float* sink) {
  const float seed = *static_cast<volatile float*>(sink);
  const __m256 x = _mm256_set1_ps(0.999f + seed * 1e-9f), y = _mm256_set1_ps(1e-3f);
  __m256 acc[kAcc];
#pragma GCC unroll 14
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_set1_ps(seed + float(j));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 14
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_fmadd_ps(acc[j], x, y);
  }
  __m256 total = acc[0];
  for (int j = 1; j < kAcc; ++j) total = _mm256_add_ps(total, acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, total);
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  *sink = sum;
  return double(iters) * kAcc * 8 * 2;
}

}  // namespace

ComputePeakFn peak_f32_fma_avx2() {
  return f32_fma_loop;
}

}  // namespace tessera::cpu
