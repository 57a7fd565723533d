// The avx512bf16 GEMM micro-kernel: an 8 x 48 fp32 tile (24 zmm accumulators) updated with vdpbf16ps.
//
// Per K pair: 3 zmm loads of the packed b-panel (48 columns x 2 k), 8 dword broadcasts of a-panel pairs
// (one per row), 24 vdpbf16ps. 24 independent accumulators cover the instruction's latency (6 cycles
// at 2 per cycle needs >= 12; measured: 8 accumulators reach 67% of peak, 16 reach 100%).
// 8 rows divide the M of DeepSeek's shapes (128, 1024, 4096); 48 columns divide 576, 2112 and 24576.
#include <immintrin.h>

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

constexpr int kMr = 8, kNr = 48, kNv = 3;

template <int M, bool kScaled>
void ukr_rows(const UkrArgs& p) {
  const char* a_rows[M];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) a_rows[r] = static_cast<const char*>(p.a) + r * p.lda * 2;
  const __m512bh* b = static_cast<const __m512bh*>(p.b);
  const int groups = (p.kc + p.group - 1) / p.group;

  for (int g = 0; g < groups; ++g) {
    const int k_begin = g * p.group;
    const int k_end = k_begin + p.group < p.kc ? k_begin + p.group : p.kc;
    __m512 acc[M][kNv];
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < kNv; ++v) acc[r][v] = _mm512_setzero_ps();

    const __m512bh* bp = b + (k_begin / 2) * kNv;
    for (int kp = k_begin / 2; kp < k_end / 2; ++kp, bp += kNv) {
      const __m512bh b0 = bp[0], b1 = bp[1], b2 = bp[2];
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        int32_t pair;
        __builtin_memcpy(&pair, a_rows[r] + kp * 4, 4);
        const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        acc[r][2] = _mm512_dpbf16_ps(acc[r][2], av, b2);
      }
    }

    const bool overwrite = g == 0 && !p.accumulate;
    __m512 col_scale[kNv];
    if (kScaled)
      for (int v = 0; v < kNv; ++v) col_scale[v] = _mm512_loadu_ps(p.col_scale + g * p.col_scale_stride + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      float* c = p.c + r * p.ldc;
      __m512 rs;
      if (kScaled) rs = _mm512_set1_ps(p.row_scale[g * p.row_scale_stride + r]);
#pragma GCC unroll 3
      for (int v = 0; v < kNv; ++v) {
        if (kScaled) {
          const __m512 s = _mm512_mul_ps(rs, col_scale[v]);
          const __m512 prev = overwrite ? _mm512_setzero_ps() : _mm512_loadu_ps(c + 16 * v);
          _mm512_storeu_ps(c + 16 * v, _mm512_fmadd_ps(acc[r][v], s, prev));
        } else {
          _mm512_storeu_ps(c + 16 * v, overwrite ? acc[r][v] : _mm512_add_ps(_mm512_loadu_ps(c + 16 * v), acc[r][v]));
        }
      }
    }
  }
}

template <bool kScaled>
void ukr_dispatch(const UkrArgs& p) {
  switch (p.m_valid) {
    case 8: return ukr_rows<8, kScaled>(p);
    case 7: return ukr_rows<7, kScaled>(p);
    case 6: return ukr_rows<6, kScaled>(p);
    case 5: return ukr_rows<5, kScaled>(p);
    case 4: return ukr_rows<4, kScaled>(p);
    case 3: return ukr_rows<3, kScaled>(p);
    case 2: return ukr_rows<2, kScaled>(p);
    default: return ukr_rows<1, kScaled>(p);
  }
}

}  // namespace

void gemm_ukr_avx512bf16_8x48(const UkrArgs& p) {
  if (p.row_scale) ukr_dispatch<true>(p); else ukr_dispatch<false>(p);
}

}  // namespace tessera::cpu
