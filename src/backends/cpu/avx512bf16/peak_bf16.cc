// Peak bf16 dot-product rate: peak_loop-inl.h's loop with a vdpbf16ps step on 24 independent zmm
// accumulators. 24 covers the instruction's latency x throughput (6 cycles x 2 per cycle on Zen 4/5
// needs >= 12).
#include <immintrin.h>

#include "backends/cpu/avx512/f32_vec.h"
#include "backends/cpu/peak_kernels.h"
#include "backends/cpu/peak_loop-inl.h"

namespace tessera::cpu {
namespace {

// The pairs (+b, -b) cancel, so the accumulators stay finite and normal however long the loop runs.
struct Bf16DotStep {
  static constexpr int kFlopsPerLane = 4;  // 2 multiplies + 2 adds
  struct Operands {
    __m512bh a, b;
  };
  static Operands operands(float seed) {
    return {_mm512_cvtne2ps_pbh(_mm512_set1_ps(seed + 1.5f), _mm512_set1_ps(seed + 1.5f)),
            _mm512_cvtne2ps_pbh(_mm512_set1_ps(-0.5f), _mm512_set1_ps(0.5f))};
  }
  static __m512 step(__m512 acc, const Operands& o) { return _mm512_dpbf16_ps(acc, o.a, o.b); }
};

}  // namespace

ComputePeakFn peak_bf16_dot_avx512bf16() {
  return peak_loop<Avx512F32, Bf16DotStep, 24>;
}

}  // namespace tessera::cpu
