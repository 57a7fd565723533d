// fp8/bf16 conversion helpers for the avx512bf16 kernel files. Header-only by necessity (inlined into
// the kernels) but private to this folder: every function is static, so no copy escapes the ISA flags.
#pragma once

#include <immintrin.h>
#include <stdint.h>

#include "backends/cpu/scalar_convert.h"

namespace tessera::cpu::avx512bf16 {

// bf16 bit pattern of an e4m3fn magnitude code c (0..127; sign handled separately).
static inline uint16_t e4m3_magnitude_to_bf16_bits(int c) {
  const int e = c >> 3, m = c & 7;
  if (c == 0x7F) return 0x7FC0;  // NaN
  if (e > 0) return uint16_t(((e + 120) << 7) | (m << 4));
  if (m == 0) return 0;
  // Subnormal m * 2^-9: normalise the 3-bit mantissa.
  int shift = 0;
  while (!(m << shift & 4)) ++shift;
  const int exp = 127 - 7 - shift;  // m<<shift in [4,8): value (m<<shift)/4 * 2^(-7-shift)
  const int frac = ((m << shift) & 3) << 5;
  return uint16_t((exp << 7) | frac);
}

// The four 64-byte tables: high and low bytes of the bf16 pattern for codes 0..127.
struct E4m3Tables {
  __m512i hi0, hi1, lo0, lo1;
  __m512i interleave_lo, interleave_hi;  // byte indices that zip (lo[i], hi[i]) into bf16 words
};

static inline E4m3Tables make_e4m3_tables() {
  alignas(64) uint8_t hi[128], lo[128], il[64], ih[64];
  for (int c = 0; c < 128; ++c) {
    const uint16_t b = e4m3_magnitude_to_bf16_bits(c);
    hi[c] = uint8_t(b >> 8);
    lo[c] = uint8_t(b & 0xFF);
  }
  for (int i = 0; i < 32; ++i) {
    il[2 * i] = uint8_t(i);           // lo byte of word i from the first source
    il[2 * i + 1] = uint8_t(64 + i);  // hi byte from the second source
    ih[2 * i] = uint8_t(32 + i);
    ih[2 * i + 1] = uint8_t(96 + i);
  }
  E4m3Tables t;
  t.hi0 = _mm512_load_si512(hi);
  t.hi1 = _mm512_load_si512(hi + 64);
  t.lo0 = _mm512_load_si512(lo);
  t.lo1 = _mm512_load_si512(lo + 64);
  t.interleave_lo = _mm512_load_si512(il);
  t.interleave_hi = _mm512_load_si512(ih);
  return t;
}

// The tables, built on first use (one copy per translation unit, like every function here).
static inline const E4m3Tables& e4m3_tables() {
  static const E4m3Tables t = make_e4m3_tables();
  return t;
}
// bf16 values times 2^k, exactly, by adding k << 7 (each lane's own k: exponent_adds) to the exponent
// field of every finite nonzero value (zeros, infinities and NaNs unchanged); the caller keeps the
// results normal.
static inline __m512i bf16_times_powers_of_two(__m512i v, __m512i exponent_adds) {
  const __mmask32 finite_nonzero =
      _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7FFF)) &
      _mm512_cmpneq_epi16_mask(_mm512_and_si512(v, _mm512_set1_epi16(0x7F80)), _mm512_set1_epi16(0x7F80));
  return _mm512_mask_add_epi16(v, finite_nonzero, v, exponent_adds);
}
static inline __m512i bf16_times_power_of_two(__m512i v, int k) {
  return bf16_times_powers_of_two(v, _mm512_set1_epi16(short(k << 7)));
}
// 64 e4m3 bytes -> 64 bf16 in natural order: out0 = elements 0..31, out1 = 32..63.
// vpermi2b looks up 7-bit magnitudes (the index's bit 7 is ignored), the sign is merged with one
// ternary-logic op, and vpermt2b zips low and high bytes into words.
static inline void e4m3x64_to_bf16(const E4m3Tables& t, __m512i x, __m512i* out0, __m512i* out1) {
  asm("" : "+v"(x));  // see e4m3x64_to_bf16_lanes
  const __m512i lo = _mm512_permutex2var_epi8(t.lo0, x, t.lo1);
  __m512i hi = _mm512_permutex2var_epi8(t.hi0, x, t.hi1);
  hi = _mm512_ternarylogic_epi32(hi, x, _mm512_set1_epi8(char(0x80)), 0xF8);  // hi | (x & 0x80)
  *out0 = _mm512_permutex2var_epi8(lo, t.interleave_lo, hi);
  *out1 = _mm512_permutex2var_epi8(lo, t.interleave_hi, hi);
}

// 64 e4m3 bytes -> 64 bf16 in "lane order": out0 holds bytes {0-7, 16-23, 32-39, 48-55}, out1 bytes
// {8-15, 24-31, 40-47, 56-63} (in that order), because the final zip uses the in-lane vpunpck{l,h}bw
// instead of two cross-lane byte permutes. Consecutive pairs stay consecutive pairs, so a dot product
// is unchanged when both operands are converted (or arranged) the same way. About 2x cheaper than
// e4m3x64_to_bf16 (2 lookups + 3 cheap ops instead of 4 permutes + 1).
static inline void e4m3x64_to_bf16_lanes(const E4m3Tables& t, __m512i x, __m512i* out0, __m512i* out1) {
  // Opaque to the optimiser, so x is copied between registers for the lookups (each vpermi2b overwrites
  // its index operand) instead of being loaded again from memory for each: GCC loaded the same 64
  // bytes three times (decode GEMV at M=1: 6.0 -> 3.9 cycles per 64 bytes with this).
  asm("" : "+v"(x));
  const __m512i lo = _mm512_permutex2var_epi8(t.lo0, x, t.lo1);
  __m512i hi = _mm512_permutex2var_epi8(t.hi0, x, t.hi1);
  hi = _mm512_ternarylogic_epi32(hi, x, _mm512_set1_epi8(char(0x80)), 0xF8);  // hi | (x & 0x80)
  *out0 = _mm512_unpacklo_epi8(lo, hi);
  *out1 = _mm512_unpackhi_epi8(lo, hi);
}

// Either of the two above: lane order where the GEMM asks for it (GemmSrc::lane_order, so both operands
// are converted alike), else natural order.
static inline void e4m3x64_to_bf16_in(const E4m3Tables& t, bool lane_order, __m512i x, __m512i* out0, __m512i* out1) {
  if (lane_order) {
    e4m3x64_to_bf16_lanes(t, x, out0, out1);
  } else {
    e4m3x64_to_bf16(t, x, out0, out1);
  }
}

// Whether 64 e4m3 codes hold a zero, subnormal or NaN code (magnitude m < 8 or m == 127), the codes
// normal_e4m3x32_to_bf16 does not cover: exactly those have (m + 1) mod 128 <= 8.
static inline bool e4m3x64_has_special(__m512i x) {
  const __m512i wrapped = _mm512_and_si512(_mm512_add_epi8(x, _mm512_set1_epi8(1)), _mm512_set1_epi8(0x7F));
  return _mm512_cmple_epu8_mask(wrapped, _mm512_set1_epi8(8)) != 0;
}

// The bias that makes normal_e4m3x32_to_bf16 return values times 2^k (k = 0: the plain values).
static inline __m512i e4m3_normal_bias(int k) {
  return _mm512_set1_epi16(short((120 + k) << 7));
}

// 32 normal e4m3 codes -> bf16 x 2^k by arithmetic, bias = e4m3_normal_bias(k): a normal code's 7
// magnitude bits are bf16's exponent and mantissa fields shifted by 4 with the exponent 120 too small,
// so one add finishes it; the sign comes from the sign-extended byte. The caller keeps the results
// normal. Two cheap ops and one widening per 32 values against two 3-uop byte permutes per 32 for the
// table lookups.
static inline __m512i normal_e4m3x32_to_bf16(__m256i codes, __m512i bias) {
  const __m512i w = _mm512_cvtepi8_epi16(codes);
  return _mm512_add_epi16(_mm512_and_si512(_mm512_slli_epi16(w, 4), _mm512_set1_epi16(short(0x87F0))), bias);
}

// 64 e4m3 codes -> 64 bf16 x 2^k at dst (natural order) by normal_e4m3x32_to_bf16 when none is
// special; false (nothing written) when one is, for the caller's table path.
static inline bool store_normal_e4m3x64(__m512i x, __m512i bias, uint16_t* dst) {
  if (e4m3x64_has_special(x)) return false;
  _mm512_storeu_si512(dst, normal_e4m3x32_to_bf16(_mm512_castsi512_si256(x), bias));
  _mm512_storeu_si512(dst + 32, normal_e4m3x32_to_bf16(_mm512_extracti64x4_epi64(x, 1), bias));
  return true;
}

// ---- float4 e2m1 (two values per byte, the even one in the low nibble) ----
struct E2m1Tables {
  __m512i values;     // word table: nibble code -> bf16 bits (indices 0..15 used)
  __m512i spread_lo;  // byte indices: word w of the result takes byte w/2 (low output half)
  __m512i spread_hi;  // ... byte 16 + w/2 (high output half)
  __m512i odd_shift;  // per-word shift: 0 for even words (low nibble), 4 for odd words (high nibble)
};

static inline E2m1Tables make_e2m1_tables() {
  static const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  alignas(64) uint16_t vals[32] = {};
  alignas(64) uint8_t lo[64], hi[64];
  alignas(64) uint16_t sh[32];
  for (int c = 0; c < 16; ++c) {
    uint32_t bits;
    __builtin_memcpy(&bits, &kMag[c & 7], 4);
    vals[c] = uint16_t((bits >> 16) | ((c & 8) ? 0x8000u : 0u));
  }
  for (int w = 0; w < 32; ++w) {
    lo[2 * w] = uint8_t(w / 2);
    hi[2 * w] = uint8_t(16 + w / 2);
    lo[2 * w + 1] = hi[2 * w + 1] = 0;  // zeroed by the mask
    sh[w] = uint16_t((w & 1) ? 4 : 0);
  }
  E2m1Tables t;
  t.values = _mm512_load_si512(vals);
  t.spread_lo = _mm512_load_si512(lo);
  t.spread_hi = _mm512_load_si512(hi);
  t.odd_shift = _mm512_load_si512(sh);
  return t;
}

// 32 packed bytes (64 e2m1 values; the low 32 bytes of x) -> 64 bf16 in natural order.
static inline void e2m1x64_to_bf16(const E2m1Tables& t, __m512i x, __m512i* out0, __m512i* out1) {
  const __mmask64 even_bytes = 0x5555555555555555ull;
  const __m512i nib = _mm512_set1_epi16(0x0F);
  const __m512i w0 = _mm512_maskz_permutexvar_epi8(even_bytes, t.spread_lo, x);
  const __m512i w1 = _mm512_maskz_permutexvar_epi8(even_bytes, t.spread_hi, x);
  *out0 = _mm512_permutexvar_epi16(_mm512_and_si512(_mm512_srlv_epi16(w0, t.odd_shift), nib), t.values);
  *out1 = _mm512_permutexvar_epi16(_mm512_and_si512(_mm512_srlv_epi16(w1, t.odd_shift), nib), t.values);
}

// Natural K offset (within its 64-block) of lane-order position i, and the inverse.
static inline int lane_order_to_natural(int i) {
  return 16 * ((i % 32) / 8) + 8 * (i / 32) + i % 8;
}
static inline int natural_to_lane_order(int n) {
  return 32 * ((n % 16) / 8) + 8 * (n / 16) + n % 8;
}

}  // namespace tessera::cpu::avx512bf16
