// Source-to-fp32 conversions and an 8 x 8 transpose for the avx2 (fp32-FMA) kernel files.
// Header-only because it is inlined into the packing loops, but private to this folder: every function
// is static, so no copy compiled with AVX2 flags can escape (backends/cpu/README.md, rule 1).
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/scalar_convert.h"

namespace tessera::cpu::avx2 {

using scalar_convert::e4m3_to_f32_scalar;
using scalar_convert::src_elem_bytes;
using scalar_convert::src_to_f32;

// The same conversion as e4m3_to_f32_scalar on the 8 codes in the low 64 bits of `codes`.
static inline __m256 e4m3x8_to_f32(__m128i codes) {
  const __m256i x = _mm256_cvtepu8_epi32(codes);
  const __m256i mag = _mm256_and_si256(x, _mm256_set1_epi32(0x7F));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x80)), 24);
  const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23)));
  const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(1.0f / 512));
  const __m256 is_sub = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag));
  const __m256 is_nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F)));
  __m256 v = _mm256_blendv_ps(normal, sub, is_sub);
  v = _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), is_nan);
  return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
}

// 8 consecutive source elements at p as fp32 (all 8 are read).
static inline __m256 load8_f32(GemmSrcType t, const void* p) {
  switch (t) {
    case GemmSrcType::kBF16:
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))), 16));
    case GemmSrcType::kE4M3:
      return e4m3x8_to_f32(_mm_loadl_epi64(static_cast<const __m128i*>(p)));
    default:
      return _mm256_loadu_ps(static_cast<const float*>(p));
  }
}

// The first `valid` of 8 elements at p (clamped to [0, 8]); the rest read as zero and are not accessed.
static inline __m256 load8_f32_partial(GemmSrcType t, const void* p, int64_t valid) {
  if (valid >= 8) return load8_f32(t, p);
  if (valid <= 0) return _mm256_setzero_ps();
  alignas(32) unsigned char tmp[32] = {};
  memcpy(tmp, p, size_t(valid) * src_elem_bytes(t));
  return load8_f32(t, tmp);
}

// Lane mask for _mm256_maskstore_ps: lanes [0, valid) set, clamped to [0, 8].
static inline __m256i store_mask8(int64_t valid) {
  const int n = valid <= 0 ? 0 : valid >= 8 ? 8 : int(valid);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// In-register transpose: afterwards r[c] lane i holds what r[i] lane c held.
static inline void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4h+j], 128-bit lane L: column 4L+j of rows 4h..4h+3.
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

}  // namespace tessera::cpu::avx2
