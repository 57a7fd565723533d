// The avx2 folder's fp32 vector traits (8 lanes of ymm), the width argument of the width templates in
// backends/cpu/*-inl.h (packing, micro-kernel, peak loops, source conversion). AVX2 has no byte/word
// masked loads, so partial vectors go through a zeroed stack copy. Private to this folder and inside an
// anonymous namespace: every copy compiled with AVX2 flags stays in its file (README.md, rule 1).
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

namespace tessera::cpu {
namespace {

struct Avx2F32 {
  using Vec = __m256;
  using IVec = __m256i;      // 8 x int32
  using IMask = __m256i;     // lane compare results (all ones / zero)
  using LoadTail = int64_t;  // a partial load: the number of leading elements to read
  using StoreTail = __m256i;
  static constexpr int kLanes = 8;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static void stream(float* p, Vec v) { _mm256_stream_ps(p, v); }  // p 32-byte aligned
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c

  // Lanes summed in order 0..7.
  static float reduce_add(Vec v) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    float sum = 0.0f;
    for (float x : lanes) sum += x;
    return sum;
  }

  // Tails: a count for loads (clamped to [0, 8] by the loads), a lane mask for stores.
  static LoadTail load_tail(int64_t valid) { return valid; }
  static StoreTail store_tail(int64_t valid) {
    const int n = valid <= 0 ? 0 : valid >= 8 ? 8 : int(valid);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static void store_part(float* p, StoreTail m, Vec v) { _mm256_maskstore_ps(p, m, v); }

  // Source elements widened to int32 lanes (all 8 read) and their partial forms (the first `valid`;
  // the rest read as zero and are not accessed).
  static IVec load_u8(const void* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))); }
  static IVec load_u16(const void* p) { return _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static IVec load_u8(const void* p, LoadTail valid) {
    return load_part(p, valid, 1, [](const void* q) { return load_u8(q); });
  }
  static IVec load_u16(const void* p, LoadTail valid) {
    return load_part(p, valid, 2, [](const void* q) { return load_u16(q); });
  }
  static Vec load(const float* p, LoadTail valid) {
    return load_part(p, valid, 4, [](const void* q) { return load(static_cast<const float*>(q)); });
  }

  // Integer lane operations for the source conversions.
  static IVec iset1(int32_t x) { return _mm256_set1_epi32(x); }
  static IVec iand(IVec a, IVec b) { return _mm256_and_si256(a, b); }
  static IVec ior(IVec a, IVec b) { return _mm256_or_si256(a, b); }
  static IVec iadd(IVec a, IVec b) { return _mm256_add_epi32(a, b); }
  template <int kBits>
  static IVec ishl(IVec a) {
    return _mm256_slli_epi32(a, kBits);
  }
  static Vec to_f32(IVec a) { return _mm256_cvtepi32_ps(a); }
  static Vec as_f32(IVec a) { return _mm256_castsi256_ps(a); }
  static IVec as_i32(Vec a) { return _mm256_castps_si256(a); }
  static IMask lt(IVec a, IVec b) { return _mm256_cmpgt_epi32(b, a); }
  static IMask eq(IVec a, IVec b) { return _mm256_cmpeq_epi32(a, b); }
  static IVec select(IMask m, IVec if_set, IVec if_clear) {
    return as_i32(_mm256_blendv_ps(as_f32(if_clear), as_f32(if_set), as_f32(m)));
  }

  // In-register transpose: afterwards r[c] lane i holds what r[i] lane c held.
  static void transpose(Vec r[8]) {
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

 private:
  // `full` applied to p when all 8 elements exist, else to a zeroed copy of the first `valid`.
  template <class Full>
  static auto load_part(const void* p, LoadTail valid, int elem_bytes, Full full) -> decltype(full(p)) {
    if (valid >= 8) return full(p);
    alignas(32) unsigned char tmp[32] = {};
    if (valid > 0) memcpy(tmp, p, size_t(valid) * elem_bytes);
    return full(tmp);
  }
};

}  // namespace
}  // namespace tessera::cpu
