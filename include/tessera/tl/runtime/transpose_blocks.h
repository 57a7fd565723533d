// tessera/tl/runtime/transpose_blocks.h - square blocks of 4- and 8-byte values transposed in
// registers (rows in, columns out) with AVX-512 or AVX2 shuffles. Used by generated kernels
// (runtime/transpose.h) and by the library's own kernels (the AMX MLA's P.V packing); standalone, so
// the kernel compiler's embedded headers can carry it.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tlrt {

#if defined(__AVX512F__)
// 16 rows of 16 4-byte values: interleave row pairs (32-bit), row quads (64-bit), then transpose the
// 4 x 4 grid of 128-bit lanes. r[4g + c] holds, in lane q, column 4q + c of rows 4g..4g+3.
static inline void transpose16x16_d(__m512i* r) {
  __m512i t[16];
  for (int k = 0; k < 16; k += 2) {
    t[k] = _mm512_unpacklo_epi32(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_epi32(r[k], r[k + 1]);
  }
  for (int k = 0; k < 16; k += 4) {
    r[k] = _mm512_unpacklo_epi64(t[k], t[k + 2]);
    r[k + 1] = _mm512_unpackhi_epi64(t[k], t[k + 2]);
    r[k + 2] = _mm512_unpacklo_epi64(t[k + 1], t[k + 3]);
    r[k + 3] = _mm512_unpackhi_epi64(t[k + 1], t[k + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
    t[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    t[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
  for (int k = 0; k < 16; ++k) r[k] = t[k];
}
// 8 rows of 8 8-byte values: interleave row pairs, then transpose the 4 x 4 grid of 128-bit lanes.
static inline void transpose8x8_q(__m512i* r) {
  __m512i t[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm512_unpacklo_epi64(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_epi64(r[k], r[k + 1]);
  }
  for (int c = 0; c < 2; ++c) {
    const __m512i v0 = _mm512_shuffle_i64x2(t[c], t[2 + c], 0x44), v1 = _mm512_shuffle_i64x2(t[c], t[2 + c], 0xEE);
    const __m512i v2 = _mm512_shuffle_i64x2(t[4 + c], t[6 + c], 0x44);
    const __m512i v3 = _mm512_shuffle_i64x2(t[4 + c], t[6 + c], 0xEE);
    r[c] = _mm512_shuffle_i64x2(v0, v2, 0x88);
    r[2 + c] = _mm512_shuffle_i64x2(v0, v2, 0xDD);
    r[4 + c] = _mm512_shuffle_i64x2(v1, v3, 0x88);
    r[6 + c] = _mm512_shuffle_i64x2(v1, v3, 0xDD);
  }
}
#endif

#if defined(__AVX2__)
// 8 rows of 8 4-byte values: as transpose16x16_d, with a 2 x 2 grid of 128-bit lanes.
static inline void transpose8x8_d(__m256i* r) {
  __m256i t[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_epi32(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_epi32(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_unpacklo_epi64(t[k], t[k + 2]);
    r[k + 1] = _mm256_unpackhi_epi64(t[k], t[k + 2]);
    r[k + 2] = _mm256_unpacklo_epi64(t[k + 1], t[k + 3]);
    r[k + 3] = _mm256_unpackhi_epi64(t[k + 1], t[k + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    t[c] = _mm256_permute2x128_si256(r[c], r[4 + c], 0x20);
    t[4 + c] = _mm256_permute2x128_si256(r[c], r[4 + c], 0x31);
  }
  for (int k = 0; k < 8; ++k) r[k] = t[k];
}
// 4 rows of 4 8-byte values.
static inline void transpose4x4_q(__m256i* r) {
  const __m256i t0 = _mm256_unpacklo_epi64(r[0], r[1]), t1 = _mm256_unpackhi_epi64(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi64(r[2], r[3]), t3 = _mm256_unpackhi_epi64(r[2], r[3]);
  r[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
  r[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
  r[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
  r[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
}
#endif

}  // namespace tlrt
