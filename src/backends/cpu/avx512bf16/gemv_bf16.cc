// Decode GEMV for the avx512bf16 kernel set: out[m, n] over K-contiguous weight rows (bf16 or e4m3)
// for M <= 8 activation rows. The weights are streamed exactly once; each 64-value chunk of a weight
// row is converted to bf16 in registers and multiplied into every activation row with vdpbf16ps.
// NB weight rows are processed together so NB independent streams and accumulator chains are in flight.
#include <immintrin.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

const avx512bf16::E4m3Tables& tables() {
  static const avx512bf16::E4m3Tables t = avx512bf16::make_e4m3_tables();
  return t;
}

inline __mmask64 byte_mask(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 64) return ~__mmask64(0);
  return (__mmask64(1) << valid) - 1;
}
inline __mmask32 word_mask(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 32) return 0xFFFFFFFFu;
  return (__mmask32(1) << valid) - 1;
}

template <int M, int NB, bool kFp8, bool kScaled>
void gemv_block(const GemvArgs& p, int64_t n) {
  const avx512bf16::E4m3Tables& t = tables();
  const char* w_rows[NB];
  const int es = kFp8 ? 1 : 2;
  for (int j = 0; j < NB; ++j) w_rows[j] = static_cast<const char*>(p.w) + (n + j) * p.ldw * es;
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  const int64_t groups = (k_pad + p.group - 1) / p.group;

  __m512 tot[M][NB];
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NB; ++j) tot[m][j] = _mm512_setzero_ps();

  for (int64_t g = 0; g < groups; ++g) {
    const int64_t kb = g * p.group, ke = kb + p.group < k_pad ? kb + p.group : k_pad;
    __m512 acc[M][NB];
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j) acc[m][j] = _mm512_setzero_ps();
    for (int64_t k = kb; k < ke; k += 64) {
      __m512i w0[NB], w1[NB];
      const bool full = k + 64 <= p.k;
      for (int j = 0; j < NB; ++j) {
        const char* src = w_rows[j] + k * es;
        if (kFp8) {
          const __m512i bytes = full ? _mm512_loadu_si512(src) : _mm512_maskz_loadu_epi8(byte_mask(p.k - k), src);
          avx512bf16::e4m3x64_to_bf16(t, bytes, &w0[j], &w1[j]);
        } else if (full) {
          w0[j] = _mm512_loadu_si512(src);
          w1[j] = _mm512_loadu_si512(src + 64);
        } else {
          w0[j] = _mm512_maskz_loadu_epi16(word_mask(p.k - k), src);
          w1[j] = _mm512_maskz_loadu_epi16(word_mask(p.k - k - 32), src + 64);
        }
      }
      for (int m = 0; m < M; ++m) {
        const uint16_t* a = p.a + m * p.lda + k;
        const __m512bh a0 = (__m512bh)_mm512_loadu_si512(a), a1 = (__m512bh)_mm512_loadu_si512(a + 32);
        for (int j = 0; j < NB; ++j) {
          acc[m][j] = _mm512_dpbf16_ps(acc[m][j], a0, (__m512bh)w0[j]);
          acc[m][j] = _mm512_dpbf16_ps(acc[m][j], a1, (__m512bh)w1[j]);
        }
      }
    }
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j) {
        if (kScaled) {
          const float s = p.a_scale[g * p.a_scale_stride + m] *
                          p.w_scale[g * p.w_scale_stride + (n + j) / p.w_scale_rows];
          tot[m][j] = _mm512_fmadd_ps(acc[m][j], _mm512_set1_ps(s), tot[m][j]);
        } else {
          tot[m][j] = _mm512_add_ps(tot[m][j], acc[m][j]);
        }
      }
  }
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NB; ++j) p.out[m * p.ldo + n + j] = _mm512_reduce_add_ps(tot[m][j]);
}

template <int M, bool kFp8, bool kScaled>
void gemv_rows(const GemvArgs& p) {
  constexpr int kNb = M <= 2 ? 4 : M <= 4 ? 2 : 1;
  int64_t n = p.n0;
  for (; n + kNb <= p.n1; n += kNb) gemv_block<M, kNb, kFp8, kScaled>(p, n);
  for (; n < p.n1; ++n) gemv_block<M, 1, kFp8, kScaled>(p, n);
}

template <bool kFp8, bool kScaled>
void gemv_dispatch(const GemvArgs& p) {
  switch (p.m) {
    case 1: return gemv_rows<1, kFp8, kScaled>(p);
    case 2: return gemv_rows<2, kFp8, kScaled>(p);
    case 3: return gemv_rows<3, kFp8, kScaled>(p);
    case 4: return gemv_rows<4, kFp8, kScaled>(p);
    case 5: return gemv_rows<5, kFp8, kScaled>(p);
    case 6: return gemv_rows<6, kFp8, kScaled>(p);
    case 7: return gemv_rows<7, kFp8, kScaled>(p);
    default: return gemv_rows<8, kFp8, kScaled>(p);
  }
}

void gemv(const GemvArgs& p) {
  const bool fp8 = p.w_type == GemmSrcType::kE4M3;
  const bool scaled = p.a_scale != nullptr;
  if (fp8) {
    if (scaled) gemv_dispatch<true, true>(p); else gemv_dispatch<true, false>(p);
  } else {
    if (scaled) gemv_dispatch<false, true>(p); else gemv_dispatch<false, false>(p);
  }
}

}  // namespace

GemvFn gemv_kernel_avx512bf16() { return gemv; }

}  // namespace tessera::cpu
