// Peak bf16 dot-product rate: vdpbf16ps on 24 independent zmm accumulators, all operands in registers.
// 24 covers the instruction's latency x throughput (6 cycles x 2 per cycle on Zen 4/5 needs >= 12).
// The pairs (+b, -b) cancel, so the accumulators stay finite and normal however long the loop runs.
#include <immintrin.h>

#include "backends/cpu/peak_kernels.h"

namespace tessera::cpu {
namespace {

constexpr int kAcc = 24;

double bf16_dot_loop(int64_t iters, float* sink) {
  // Operands come from *sink (a run-time value) so the compiler cannot fold the loop away.
  const float seed = *static_cast<volatile float*>(sink);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(seed + 1.5f), _mm512_set1_ps(seed + 1.5f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(-0.5f), _mm512_set1_ps(0.5f));
  __m512 acc[kAcc];
#pragma GCC unroll 24
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_set1_ps(seed + float(j));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  }
  __m512 total = acc[0];
  for (int j = 1; j < kAcc; ++j) total = _mm512_add_ps(total, acc[j]);
  *sink = _mm512_reduce_add_ps(total);
  return double(iters) * kAcc * 16 * 4;  // 16 lanes x (2 multiplies + 2 adds)
}

}  // namespace

ComputePeakFn peak_bf16_dot_avx512bf16() {
  return bf16_dot_loop;
}

}  // namespace tessera::cpu
