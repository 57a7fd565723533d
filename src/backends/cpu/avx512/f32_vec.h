// The avx512 folder's fp32 vector traits (16 lanes of zmm), the width argument of the width templates in
// backends/cpu/*-inl.h (packing, micro-kernel, peak loops, source conversion). Partial vectors are
// masked loads and stores. Private to this folder and the wider ones (avx512bf16/peak_bf16.cc), and
// inside an anonymous namespace: every copy compiled with AVX-512 flags stays in its file (README.md,
// rule 1).
#pragma once

#include <immintrin.h>
#include <stdint.h>

namespace tessera::cpu {
namespace {

struct Avx512F32 {
  using Vec = __m512;
  using IVec = __m512i;  // 16 x int32
  using IMask = __mmask16;
  using LoadTail = __mmask16;
  using StoreTail = __mmask16;
  static constexpr int kLanes = 16;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static void stream(float* p, Vec v) { _mm512_stream_ps(p, v); }  // p 64-byte aligned
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c
  static float reduce_add(Vec v) { return _mm512_reduce_add_ps(v); }        // pairwise halves

  // Lanes [0, valid) set, clamped to [0, 16]; the same mask serves loads and stores.
  static __mmask16 mask(int64_t valid) {
    if (valid <= 0) return 0;
    if (valid >= 16) return 0xFFFF;
    return __mmask16((1u << valid) - 1);
  }
  static LoadTail load_tail(int64_t valid) { return mask(valid); }
  static StoreTail store_tail(int64_t valid) { return mask(valid); }
  static void store_part(float* p, StoreTail m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }

  // Source elements widened to int32 lanes (all 16 read; unmasked loads are cheaper when the whole
  // vector exists) and their masked forms (lanes outside m read as zero and are not accessed).
  static IVec load_u8(const void* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static IVec load_u16(const void* p) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
  }
  static IVec load_u8(const void* p, LoadTail m) { return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, p)); }
  static IVec load_u16(const void* p, LoadTail m) { return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)); }
  static Vec load(const float* p, LoadTail m) { return _mm512_maskz_loadu_ps(m, p); }

  // Integer lane operations for the source conversions.
  static IVec iset1(int32_t x) { return _mm512_set1_epi32(x); }
  static IVec iand(IVec a, IVec b) { return _mm512_and_si512(a, b); }
  static IVec ior(IVec a, IVec b) { return _mm512_or_si512(a, b); }
  static IVec iadd(IVec a, IVec b) { return _mm512_add_epi32(a, b); }
  template <int kBits>
  static IVec ishl(IVec a) {
    return _mm512_slli_epi32(a, kBits);
  }
  static Vec to_f32(IVec a) { return _mm512_cvtepi32_ps(a); }
  static Vec as_f32(IVec a) { return _mm512_castsi512_ps(a); }
  static IVec as_i32(Vec a) { return _mm512_castps_si512(a); }
  static IMask lt(IVec a, IVec b) { return _mm512_cmplt_epi32_mask(a, b); }
  static IMask eq(IVec a, IVec b) { return _mm512_cmpeq_epi32_mask(a, b); }
  static IVec select(IMask m, IVec if_set, IVec if_clear) { return _mm512_mask_mov_epi32(if_clear, m, if_set); }

  // In-register transpose: afterwards r[c] lane i holds what r[i] lane c held.
  static void transpose(Vec r[16]) {
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
};

}  // namespace
}  // namespace tessera::cpu
