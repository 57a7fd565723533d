// fp16 and e5m2 sources as bf16 for the avx512bf16 / amx packing (gemm_kernel_set.h, F16Split). Every
// e5m2 value is a bf16 value (fp16's exponent range, 2 mantissa bits), so it converts exactly; an fp16
// value splits into hi = bf16(x) (round to nearest even) and lo = x - hi, both exact in bf16 (lo holds
// the 3 low significand bits), and stands for four bf16 K values. Static (folder-private, see
// backends/cpu/README.md rule 1).
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/scalar_convert.h"

namespace tessera::cpu::avx512bf16 {

// Exact fp32 -> bf16 bits of a value that bf16 holds (the low 16 bits are zero).
static inline __m256i exact_f32_to_bf16(__m512 x) {
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(x), 16));
}

// 16 e5m2 codes -> 16 bf16 (through binary16: the code is its top byte).
static inline __m256i e5m2x16_to_bf16(__m128i codes) {
  return exact_f32_to_bf16(_mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(codes), 8)));
}

// 64 e5m2 codes -> v0 = bf16 of codes 0..31, v1 = codes 32..63.
static inline void e5m2x64_to_bf16(__m512i codes, __m512i* v0, __m512i* v1) {
  const __m256i c0 = _mm512_castsi512_si256(codes), c1 = _mm512_extracti64x4_epi64(codes, 1);
  *v0 = _mm512_inserti64x4(_mm512_castsi256_si512(e5m2x16_to_bf16(_mm256_castsi256_si128(c0))),
                           e5m2x16_to_bf16(_mm256_extracti128_si256(c0, 1)), 1);
  *v1 = _mm512_inserti64x4(_mm512_castsi256_si512(e5m2x16_to_bf16(_mm256_castsi256_si128(c1))),
                           e5m2x16_to_bf16(_mm256_extracti128_si256(c1, 1)), 1);
}

// 16 fp16 values -> their hi and lo bf16 parts, zero-extended to dwords. lo of an infinity is 0 (x - hi
// would be NaN there); NaN stays NaN in both.
static inline void f16x16_split(__m256i halves, __m512i* hi, __m512i* lo) {
  const __m512 x = _mm512_cvtph_ps(halves);
  const __m512i h = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x));
  const __mmask16 finite = ~_mm512_fpclass_ps_mask(x, 0x18);  // +inf, -inf
  const __m512 rest = _mm512_maskz_sub_ps(finite, x, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
  *hi = h;
  *lo = _mm512_cvtepu16_epi32(exact_f32_to_bf16(rest));
}

// 16 fp16 values as 64 bf16 K values in the given split order: v0 = positions 0..31, v1 = 32..63.
static inline void f16x16_to_split(__m256i halves, F16Split order, __m512i* v0, __m512i* v1) {
  __m512i h, l;
  f16x16_split(halves, &h, &l);
  if (order == F16Split::kHiHiLoLo) {  // dwords hh, ll per value
    const __m512i hh = _mm512_or_si512(h, _mm512_slli_epi32(h, 16)), ll = _mm512_or_si512(l, _mm512_slli_epi32(l, 16));
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    *v0 = _mm512_permutex2var_epi32(hh, first, ll);
    *v1 = _mm512_permutex2var_epi32(hh, second, ll);
  } else {  // the dword hl twice per value
    const __m512i hl = _mm512_or_si512(h, _mm512_slli_epi32(l, 16));
    *v0 = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), hl);
    *v1 = _mm512_permutexvar_epi32(_mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15), hl);
  }
}

// 16 fp16 values as the dwords of the bf16 K pair (k, k + 1) of the split (k even, counted in bf16 K).
static inline __m512i f16x16_split_pair(__m256i halves, F16Split order, int64_t k) {
  __m512i h, l;
  f16x16_split(halves, &h, &l);
  if (order == F16Split::kHiLoHiLo) return _mm512_or_si512(h, _mm512_slli_epi32(l, 16));
  const __m512i part = (k & 2) ? l : h;
  return _mm512_or_si512(part, _mm512_slli_epi32(part, 16));
}

// Scalar forms, for strided sources.
static inline uint16_t f32_bits_to_bf16_rne(uint32_t bits) {
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x40);  // NaN stays NaN
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1)) >> 16);
}

// bf16 K value k (counted in bf16 K) of the split of fp16 bits h.
static inline uint16_t f16_split_part(uint16_t h, F16Split order, int64_t k) {
  const float x = scalar_convert::f16_to_f32_scalar(h);
  uint32_t xb;
  memcpy(&xb, &x, 4);
  const uint16_t hi = f32_bits_to_bf16_rne(xb);
  const bool want_hi = order == F16Split::kHiHiLoLo ? (k & 2) == 0 : (k & 1) == 0;
  if (want_hi) return hi;
  if ((xb & 0x7FFFFFFFu) == 0x7F800000u) return 0;  // an infinity is all hi
  const uint32_t hb = uint32_t(hi) << 16;
  float hf;
  memcpy(&hf, &hb, 4);
  const float rest = x - hf;
  uint32_t rb;
  memcpy(&rb, &rest, 4);
  return uint16_t(rb >> 16);
}

static inline uint16_t e5m2_to_bf16_bits(uint8_t code) {
  const float x = scalar_convert::e5m2_to_f32_scalar(code);
  uint32_t b;
  memcpy(&b, &x, 4);
  return uint16_t(b >> 16);
}

}  // namespace tessera::cpu::avx512bf16
