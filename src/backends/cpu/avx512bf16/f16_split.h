// fp16 and e5m2 sources as bf16 for the avx512bf16 / amx packing (gemm_kernel_set.h, F16Split). Every
// e5m2 value is a bf16 value (fp16's exponent range, 2 mantissa bits), so it converts exactly; an fp16
// value splits into hi = bf16(x) (round to nearest even) and lo = x - hi, both exact in bf16 (lo holds
// the 3 low significand bits), and stands for one bf16 K pair. Static (folder-private, see
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

// 16 fp16 values as the dwords of their bf16 K pairs in the given split (gemm_kernel_set.h). hi is
// rounded to nearest even on the fp32 bits (NaN stays NaN or becomes an infinity, whose lo is NaN);
// lo = x - hi is exact and has zero low 16 bits too. lo of an infinity is 0 (x - hi would be NaN).
static inline __m512i f16x16_split_pairs(__m256i halves, F16Split order) {
  const __m512 x = _mm512_cvtph_ps(halves);
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i hi = _mm512_and_si512(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))),
                                      _mm512_set1_epi32(int(0xFFFF0000u)));
  if (order == F16Split::kHiHi) return _mm512_or_si512(hi, _mm512_srli_epi32(hi, 16));
  const __mmask16 finite = ~_mm512_fpclass_ps_mask(x, 0x18);  // +inf, -inf
  const __m512i lo = _mm512_castps_si512(_mm512_maskz_sub_ps(finite, x, _mm512_castsi512_ps(hi)));
  if (order == F16Split::kLoLo) return _mm512_or_si512(lo, _mm512_srli_epi32(lo, 16));
  return _mm512_or_si512(lo, _mm512_srli_epi32(hi, 16));  // [hi lo]: hi in the low half (even K)
}

// Scalar forms, for strided sources.
static inline uint16_t f32_bits_to_bf16_rne(uint32_t bits) {
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x40);  // NaN stays NaN
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1)) >> 16);
}

// bf16 K value k (counted in bf16 K: two per fp16 value) of the split of fp16 bits h.
static inline uint16_t f16_split_part(uint16_t h, F16Split order, int64_t k) {
  const float x = scalar_convert::f16_to_f32_scalar(h);
  uint32_t xb;
  memcpy(&xb, &x, 4);
  const uint16_t hi = f32_bits_to_bf16_rne(xb);
  if (order == F16Split::kHiHi || (order == F16Split::kHiLo && (k & 1) == 0)) return hi;
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
