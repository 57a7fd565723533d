// Source-to-fp32 conversions and a 16 x 16 transpose for the avx512 (fp32-FMA) kernel files.
// Header-only because it is inlined into the packing loops, but private to this folder: every function
// is static, so no copy compiled with AVX-512 flags can escape (backends/cpu/README.md, rule 1).
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/scalar_convert.h"

namespace tessera::cpu::avx512 {

using scalar_convert::e4m3_to_f32_scalar;
using scalar_convert::src_elem_bytes;
using scalar_convert::src_to_f32;

// Lanes [0, valid) set, clamped to [0, 16].
static inline __mmask16 mask16(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 16) return 0xFFFF;
  return __mmask16((1u << valid) - 1);
}

// The same conversion as e4m3_to_f32_scalar on 16 codes.
static inline __m512 e4m3x16_to_f32(__m128i codes) {
  const __m512i x = _mm512_cvtepu8_epi32(codes);
  const __m512i mag = _mm512_and_si512(x, _mm512_set1_epi32(0x7F));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x80)), 24);
  __m512i bits = _mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23));
  const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(mag), _mm512_set1_ps(1.0f / 512));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8)), _mm512_castps_si512(sub));
  bits =
      _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7F)), _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(_mm512_or_si512(bits, sign));
}

static inline __m512 bf16x16_to_f32(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// 16 consecutive source elements at p as fp32; lanes outside m read as zero and are not accessed.
// Callers pass a compile-time type (templates over GemmSrcType) so the switch folds away.
static inline __m512 load16_f32(GemmSrcType t, const void* p, __mmask16 m) {
  switch (t) {
    case GemmSrcType::kBF16:
      return bf16x16_to_f32(_mm256_maskz_loadu_epi16(m, p));
    case GemmSrcType::kE4M3:
      return e4m3x16_to_f32(_mm_maskz_loadu_epi8(m, p));
    default:
      return _mm512_maskz_loadu_ps(m, p);
  }
}

// All 16 elements at p (unmasked loads: cheaper than masked ones when the whole vector exists).
static inline __m512 load16_f32_full(GemmSrcType t, const void* p) {
  switch (t) {
    case GemmSrcType::kBF16:
      return bf16x16_to_f32(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
    case GemmSrcType::kE4M3:
      return e4m3x16_to_f32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    default:
      return _mm512_loadu_ps(p);
  }
}

// In-register transpose: afterwards r[c] lane i holds what r[i] lane c held.
static inline void transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i+j], 128-bit lane L: column 4L+j of rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  // Gather lane L of u[j], u[4+j], u[8+j], u[12+j] into r[4L+j].
  for (int j = 0; j < 4; ++j) {
    const __m512 s0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44);
    const __m512 s1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
    const __m512 s2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
    const __m512 s3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
    r[0 + j] = _mm512_shuffle_f32x4(s0, s2, 0x88);
    r[4 + j] = _mm512_shuffle_f32x4(s0, s2, 0xDD);
    r[8 + j] = _mm512_shuffle_f32x4(s1, s3, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(s1, s3, 0xDD);
  }
}

}  // namespace tessera::cpu::avx512
