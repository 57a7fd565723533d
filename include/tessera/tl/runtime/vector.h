// tessera/tl/runtime/vector.h - the SIMD layer of generated kernels: TESSERA_TL_VW-lane vectors (GCC
// vector extensions, which the host compiler maps onto the ISA the kernel is built for), loads and
// stores of every element type (contiguous, masked, gathered), conversions and math.
//
// Lanes of a vectorized T.Parallel loop compute in these types: float32 for every float type narrower
// than 64 bits (vf), float64 (vd), int32 for narrow integers (vi), uint32 (vu), int64 (vl), uint64
// (vul). A mask (vm) holds -1 (true) or 0 per lane. Masked loads never touch memory of inactive lanes.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "tessera/tl/runtime/scalar.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define TLRT_AVX512_MASKS 1
#endif

#ifndef TESSERA_TL_VW
#define TESSERA_TL_VW 16
#endif

namespace tlrt {

constexpr int VW = TESSERA_TL_VW;
typedef float vf __attribute__((vector_size(4 * VW)));
typedef double vd __attribute__((vector_size(8 * VW)));
typedef int32_t vi __attribute__((vector_size(4 * VW)));
typedef uint32_t vu __attribute__((vector_size(4 * VW)));
typedef int64_t vl __attribute__((vector_size(8 * VW)));
typedef uint64_t vul __attribute__((vector_size(8 * VW)));
typedef uint16_t vh __attribute__((vector_size(2 * VW)));
typedef int16_t vs __attribute__((vector_size(2 * VW)));
typedef uint8_t vb __attribute__((vector_size(VW)));
typedef int8_t vsb __attribute__((vector_size(VW)));
typedef vi vm;

template <class V>
using elem_t = std::remove_cv_t<std::remove_reference_t<decltype(std::declval<V>()[0])>>;

// Every lane s, bit for bit (V{} + s turned -0.0 into +0.0 and cost an addition per use). A vector
// built from VW copies is one broadcast to GCC (a lane loop became insert chains and constants
// rebuilt inside loops).
template <class V, size_t... I>
inline V splat_lanes(elem_t<V> s, std::index_sequence<I...>) {
  return V{((void)I, s)...};
}
template <class V>
inline V splat(elem_t<V> s) {
  return splat_lanes<V>(s, std::make_index_sequence<VW>{});
}
inline vi iota() {
  vi r;
  for (int l = 0; l < VW; ++l) r[l] = l;
  return r;
}
inline vm all_m() {
  return vm{} - 1;
}
inline vm bmask(bool b) {
  return b ? all_m() : vm{};
}
// Lanes [0, n) active.
inline vm first_n(int64_t n) {
  return iota() < splat<vi>(int32_t(n < VW ? n : VW));
}
inline bool any(vm m) {
#if defined(TLRT_AVX512_MASKS) && TESSERA_TL_VW == 16  // a plain function: `if constexpr` would not discard
  return _mm512_test_epi32_mask((__m512i)m, (__m512i)m) != 0;
#elif defined(__AVX__) && TESSERA_TL_VW == 8
  return !_mm256_testz_si256((__m256i)m, (__m256i)m);
#endif
  const vm zero = {};
  return std::memcmp(&m, &zero, sizeof(vm)) != 0;
}

// Widening / narrowing lane conversions. GCC splits __builtin_convertvector between 32- and 64-byte
// vectors into 256-bit halves, and on AVX2 widens 16 to 32 bytes through two 128-bit halves; the
// AVX-512 / AVX2 instructions do it in one step.
template <class To, class From>
inline To convert(From x) {
#if defined(__AVX2__)
  if constexpr (VW == 8 && sizeof(To) == 32 && sizeof(From) == 16 && std::is_integral_v<elem_t<To>>) {
    if constexpr (std::is_signed_v<elem_t<From>>) return (To)_mm256_cvtepi16_epi32((__m128i)x);
    return (To)_mm256_cvtepu16_epi32((__m128i)x);
  }
  if constexpr (VW == 8 && sizeof(To) == 32 && sizeof(From) == 8 && std::is_integral_v<elem_t<To>>) {
    long long bytes;
    std::memcpy(&bytes, &x, 8);
    if constexpr (std::is_signed_v<elem_t<From>>) return (To)_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes));
    return (To)_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
  }
  if constexpr (VW == 8 && sizeof(To) == 16 && sizeof(From) == 32 && std::is_integral_v<elem_t<From>>) {
    // the low two bytes of every 32-bit lane: gathered per 128-bit half, then the halves joined
    const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9,
                                          12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    return (To)_mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_shuffle_epi8((__m256i)x, pick), 0x08));
  }
  if constexpr (VW == 8 && sizeof(To) == 8 && sizeof(From) == 32 && std::is_integral_v<elem_t<From>>) {
    // the low byte of every 32-bit lane: four per 128-bit half, then the halves' two words joined (GCC
    // narrows lane by lane here: eight extracts and shifts per vector, which bounded FP8 stores)
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i words =
        _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8((__m256i)x, pick), _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    const long long bytes = _mm_cvtsi128_si64(_mm256_castsi256_si128(words));
    To r;
    std::memcpy(&r, &bytes, 8);
    return r;
  }
#endif
#ifdef TLRT_AVX512_MASKS
  if constexpr (VW == 16 && sizeof(To) == 64 && sizeof(From) == 32) {
    if constexpr (std::is_signed_v<elem_t<From>>) return (To)_mm512_cvtepi16_epi32((__m256i)x);
    return (To)_mm512_cvtepu16_epi32((__m256i)x);
  }
  if constexpr (VW == 16 && sizeof(To) == 64 && sizeof(From) == 16) {
    if constexpr (std::is_signed_v<elem_t<From>>) return (To)_mm512_cvtepi8_epi32((__m128i)x);
    return (To)_mm512_cvtepu8_epi32((__m128i)x);
  }
  if constexpr (VW == 16 && sizeof(To) == 32 && sizeof(From) == 64 && std::is_integral_v<elem_t<From>>)
    return (To)_mm512_cvtepi32_epi16((__m512i)x);
  if constexpr (VW == 16 && sizeof(To) == 16 && sizeof(From) == 64 && std::is_integral_v<elem_t<From>>)
    return (To)_mm512_cvtepi32_epi8((__m512i)x);
#endif
  return __builtin_convertvector(x, To);
}
inline vl widen(vm m) {
  return __builtin_convertvector(m, vl);
}
inline vm narrow(vl m) {
  return __builtin_convertvector(m, vi);
}

// ---- raw memory access (storage vectors) ----
template <class R>
inline R raw_load(const void* p) {
  R r;
  std::memcpy(&r, p, sizeof(R));
  return r;
}
template <class R>
inline void raw_store(void* p, R v) {
  std::memcpy(p, &v, sizeof(R));
}
template <class R>
inline R raw_load_m(const void* p, vm m) {
#ifdef TLRT_AVX512_MASKS
  if constexpr (VW == 16) {
    const __mmask16 k = _mm512_test_epi32_mask((__m512i)m, (__m512i)m);
    if constexpr (sizeof(elem_t<R>) == 4) return (R)_mm512_maskz_loadu_epi32(k, p);
    if constexpr (sizeof(elem_t<R>) == 2) return (R)_mm256_maskz_loadu_epi16(k, p);
    if constexpr (sizeof(elem_t<R>) == 1) return (R)_mm_maskz_loadu_epi8(k, p);
  }
#endif
#if defined(__AVX2__)
  if constexpr (VW == 8 && sizeof(elem_t<R>) == 4)
    return (R)_mm256_maskload_epi32(static_cast<const int*>(p), (__m256i)m);
#endif
  R r = {};
  const elem_t<R>* s = static_cast<const elem_t<R>*>(p);
  for (int l = 0; l < VW; ++l)
    if (m[l]) r[l] = s[l];
  return r;
}
template <class R>
inline void raw_store_m(void* p, R v, vm m) {
#ifdef TLRT_AVX512_MASKS
  if constexpr (VW == 16) {
    const __mmask16 k = _mm512_test_epi32_mask((__m512i)m, (__m512i)m);
    if constexpr (sizeof(elem_t<R>) == 4) return _mm512_mask_storeu_epi32(p, k, (__m512i)v);
    if constexpr (sizeof(elem_t<R>) == 2) return _mm256_mask_storeu_epi16(p, k, (__m256i)v);
    if constexpr (sizeof(elem_t<R>) == 1) return _mm_mask_storeu_epi8(p, k, (__m128i)v);
  }
#endif
#if defined(__AVX2__)
  if constexpr (VW == 8 && sizeof(elem_t<R>) == 4)
    return _mm256_maskstore_epi32(static_cast<int*>(p), (__m256i)m, (__m256i)v);
#endif
  elem_t<R>* d = static_cast<elem_t<R>*>(p);
  for (int l = 0; l < VW; ++l)
    if (m[l]) d[l] = v[l];
}
// A store that bypasses the cache when `stream` is set and the address is aligned for it (16 bytes
// at least).
template <class R>
inline void raw_store_nt(void* p, R v, bool stream) {
#if defined(__AVX__)
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (stream && a % sizeof(R) == 0) {
#if defined(__AVX512F__)
    if constexpr (sizeof(R) == 64) return _mm512_stream_si512(static_cast<__m512i*>(p), (__m512i)v);
#endif
    if constexpr (sizeof(R) == 32) return _mm256_stream_si256(static_cast<__m256i*>(p), (__m256i)v);
    if constexpr (sizeof(R) == 16) return _mm_stream_si128(static_cast<__m128i*>(p), (__m128i)v);
    if constexpr (sizeof(R) == 8) {  // eight FP8 or uint8 lanes of an AVX2 kernel: movnti
      long long bits;
      std::memcpy(&bits, &v, 8);
      return _mm_stream_si64(static_cast<long long*>(p), bits);
    }
  }
  // numpy and glibc's malloc align large arrays to 16 bytes only: wider vectors there stream in
  // 16-byte pieces (consecutive stores still fill whole lines in the write-combining buffers).
  if constexpr (sizeof(R) > 16 && sizeof(R) % 16 == 0) {
    if (stream && a % 16 == 0) {
      for (size_t k = 0; k < sizeof(R); k += 16) {
        __m128i piece;
        std::memcpy(&piece, reinterpret_cast<const char*>(&v) + k, 16);
        _mm_stream_si128(reinterpret_cast<__m128i*>(static_cast<char*>(p) + k), piece);
      }
      return;
    }
  }
#endif
  (void)stream;
  raw_store(p, v);
}
template <class R>
inline R raw_gather(const void* p, vl off, vm m) {
#ifdef TLRT_AVX512_MASKS
  // 4-byte lanes: two hardware gathers of 8 (a lane loop compiled to one extract and one masked
  // broadcast per lane; column reads of a transpose's on-chip tile are such gathers).
  if constexpr (VW == 16 && sizeof(elem_t<R>) == 4) {
    const __mmask16 k = _mm512_test_epi32_mask((__m512i)m, (__m512i)m);
    __m512i lo, hi;  // lanes 0-7 and 8-15 of the offsets
    std::memcpy(&lo, &off, 64);
    std::memcpy(&hi, reinterpret_cast<const char*>(&off) + 64, 64);
    const __m256i a = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), __mmask8(k), lo, p, 4);
    const __m256i b = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), __mmask8(k >> 8), hi, p, 4);
    return (R)_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  }
#endif
  R r = {};
  const elem_t<R>* s = static_cast<const elem_t<R>*>(p);
  for (int l = 0; l < VW; ++l)
    if (m[l]) r[l] = s[off[l]];
  return r;
}
template <class R>
inline void raw_scatter(void* p, vl off, R v, vm m) {
  elem_t<R>* d = static_cast<elem_t<R>*>(p);
  for (int l = 0; l < VW; ++l)
    if (m[l]) d[off[l]] = v[l];
}

// ---- decoders (storage -> compute) and encoders (compute -> storage) ----
inline vf dec_f32(vf x) {
  return x;
}
inline vf enc_f32(vf x) {
  return x;
}
inline vd dec_f64(vd x) {
  return x;
}
inline vd enc_f64(vd x) {
  return x;
}
inline vf dec_bf16(vh h) {
  return (vf)(convert<vu>(h) << 16);
}
inline vh enc_bf16(vf x) {
  // Round to nearest even, NaN -> sign | 0x7FC0: ml_dtypes bit for bit. vcvtneps2bf16 rounds the same
  // way but flushes subnormal inputs to zero and keeps NaN payloads, so it only takes vectors without
  // such lanes (one class test; the integer path below costs ~10 more instructions per vector).
#if TESSERA_TL_VW == 16 && defined(__AVX512BF16__)
  if (__builtin_expect(_mm512_fpclass_ps_mask((__m512)x, 0xA1) == 0, 1))  // QNaN | denormal | SNaN
    return (vh)_mm512_cvtneps_pbh((__m512)x);
#endif
  const vu u = (vu)x;
  const vu r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  if (__builtin_expect(!any(x != x), 1)) return convert<vh>(r);  // no NaN lane: one compare, no select
  const vi nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return convert<vh>(nan ? (((u >> 16) & 0x8000u) | 0x7FC0u) : r);
}
// Small floats decode with integer ops only (multiplying tiny f32 values by 2^k would be exact but slow:
// subnormal operands take a microcode assist on some cores). A normal code (exponent e > 0) becomes
// ((code & magnitude) << shift) + rebias; a subnormal code (e == 0) gives that formula's value v for
// 2^(1-bias) * (1 + m/2^mbits) and the true value is 2v - 2^(1-bias), exact in float32.
inline vf dec_half_bits(vu u) {  // u: float16 bit patterns in the low 16 bits of each lane
  const vu mag = u & 0x7FFFu;
  const vf normal = (vf)((mag << 13) + (112u << 23));
  const vf value = (mag >> 10) == 0u ? normal * 2.0f - 0x1p-14f : normal;
  const vu special = 0x7F800000u | ((u & 0x3FFu) << 13);
  return (vf)(((mag >> 10) == 0x1Fu ? special : (vu)value) | ((u & 0x8000u) << 16));
}
inline vf dec_f16(vh h) {
  return dec_half_bits(convert<vu>(h));
}
// Codes of the small float formats (scalar.h's f32_to_f16 / f32_to_e4m3 / f32_to_e5m2) in lane
// arithmetic. For |x| with exponent e, adding c = 2^(max(e, kMinExp) + 23 - kMan) rounds |x| to the
// format's step with ties to even (the subnormal step below 2^kMinExp, fp32 subnormal inputs to 0),
// and the sum's low mantissa bits then hold 2^kMan + m for a normal result, m for a subnormal one, so
// the code is ((max(e, kMinExp) - kMinExp) << kMan) plus those bits. Magnitudes past the format's range
// (inf and NaN included) give codes above its largest one. Every lane is compared as signed: AVX2 has
// no unsigned minimum or compare.
template <int kMan, int kMinExp>
inline vi small_float_magnitude_code(vu a) {  // a: |x|'s bits
  constexpr int32_t kMinNormal = (127 + kMinExp) << 23;
  const vi exponent = (vi)(a & 0x7F800000u), e = exponent > kMinNormal ? exponent : kMinNormal;
  const vf c = (vf)((vu)e + (uint32_t(23 - kMan) << 23));
  const vi low = (vi)((vf)a + c) & ((4 << kMan) - 1);
  return ((e - kMinNormal) >> (23 - kMan)) + low;
}
// Past 65504 the code rounds to inf (0x7C00); NaN lanes (rare: one compare for the vector) keep their
// payload's top bits, as the scalar rule (and numpy) do.
inline vh enc_f16(vf x) {
  const vu u = (vu)x, a = u & 0x7FFFFFFFu, sign = (u >> 16) & 0x8000u;
  const vi code = small_float_magnitude_code<10, -14>(a);
  const vi r = (code < 0x7C00 ? code : 0x7C00) | (vi)sign;
  if (__builtin_expect(!any(x != x), 1)) return convert<vh>(r);
  const vu payload = (a & 0x7FFFFFu) >> 13;
  const vi nan = (vi)(sign | 0x7C00u | (payload != 0u ? payload : 1u));
  return convert<vh>((vi)a > int32_t(0x7F800000u) ? nan : r);
}
inline vf dec_e4m3(vb b) {
  const vu u = convert<vu>(b);
  const vu mag = u & 0x7Fu;
  const vf normal = (vf)((mag << 20) + (120u << 23));
  const vf value = mag < 8u ? normal * 2.0f - 0x1p-6f : normal;
  const vu r = (vu)value | ((u & 0x80u) << 24);
  return (vf)(mag == 0x7Fu ? ((r & 0x80000000u) | 0x7FC00000u) : r);
}
// Past 448 (and inf / NaN) the code exceeds 0x7E and becomes 0x7F, as in the scalar rule.
inline vb enc_e4m3(vf x) {
  const vu u = (vu)x;
  const vi code = small_float_magnitude_code<3, -6>(u & 0x7FFFFFFFu);
  return convert<vb>((code < 0x7F ? code : 0x7F) | (vi)((u >> 24) & 0x80u));
}
inline vf dec_e5m2(vb b) {
  return dec_half_bits(convert<vu>(b) << 8);
}
// Past 57344 the code rounds to inf (0x7C); NaN becomes 0x7E, as in the scalar rule.
inline vb enc_e5m2(vf x) {
  const vu u = (vu)x, a = u & 0x7FFFFFFFu;
  const vi code = small_float_magnitude_code<2, -14>(a);
  const vi mag = (vi)a > int32_t(0x7F800000u) ? 0x7E : (code < 0x7C ? code : 0x7C);
  return convert<vb>(mag | (vi)((u >> 24) & 0x80u));
}
// e2m1 codes (one per byte, low nibble): codes 2..7 are 2^((c >> 1) - 1) * (1 + (c & 1) / 2), built
// from their exponent and mantissa bits; 0 and 1 are 0 and 0.5.
inline vf dec_e2m1(vb b) {
  const vi c = convert<vi>(b), m = c & 7;
  const vf normal = (vf)((((m >> 1) + 126) << 23) | ((m & 1) << 22));
  const vf value = m < 2 ? __builtin_convertvector(m, vf) * 0.5f : normal;
  return (vf)((vu)value | (vu)((c & 8) << 28));
}
// Past 6 (and inf) the code exceeds 7 and saturates to 7; NaN becomes 0, as in the scalar rule.
inline vb enc_e2m1(vf x) {
  const vu u = (vu)x, a = u & 0x7FFFFFFFu;
  const vi code = small_float_magnitude_code<1, 0>(a);
  const vi signed_code = (code < 7 ? code : 7) | (vi)((u >> 28) & 0x8u);
  return convert<vb>((vi)a > int32_t(0x7F800000u) ? 0 : signed_code);
}
inline vi dec_i8(vsb x) {
  return convert<vi>(x);
}
inline vsb enc_i8(vi x) {
  return convert<vsb>(x);
}
inline vi dec_u8(vb x) {
  return convert<vi>(x);
}
inline vb enc_u8(vi x) {
  return convert<vb>(x);
}
inline vi dec_i16(vs x) {
  return convert<vi>(x);
}
inline vs enc_i16(vi x) {
  return convert<vs>(x);
}
inline vi dec_u16(vh x) {
  return convert<vi>(x);
}
inline vh enc_u16(vi x) {
  return convert<vh>(x);
}
inline vi dec_i32(vi x) {
  return x;
}
inline vi enc_i32(vi x) {
  return x;
}
inline vu dec_u32(vu x) {
  return x;
}
inline vu enc_u32(vu x) {
  return x;
}
inline vl dec_i64(vl x) {
  return x;
}
inline vl enc_i64(vl x) {
  return x;
}
inline vul dec_u64(vul x) {
  return x;
}
inline vul enc_u64(vul x) {
  return x;
}
inline vm dec_bool(vb x) {
  return convert<vi>(x) != 0;
}
inline vb enc_bool(vm m) {
  return convert<vb>(m & 1);
}

#define TLRT_VECTOR_DTYPE(NAME, STORE_T, RAW, COMPUTE)             \
  inline COMPUTE ld_##NAME(const STORE_T* p) {                     \
    return dec_##NAME(raw_load<RAW>(p));                           \
  }                                                                \
  inline COMPUTE ld_##NAME##_m(const STORE_T* p, vm m) {           \
    return dec_##NAME(raw_load_m<RAW>(p, m));                      \
  }                                                                \
  inline COMPUTE ld_##NAME##_g(const STORE_T* p, vl off, vm m) {   \
    return dec_##NAME(raw_gather<RAW>(p, off, m));                 \
  }                                                                \
  inline void st_##NAME(STORE_T* p, COMPUTE v) {                   \
    raw_store<RAW>(p, enc_##NAME(v));                              \
  }                                                                \
  inline void st_##NAME##_m(STORE_T* p, COMPUTE v, vm m) {         \
    raw_store_m<RAW>(p, enc_##NAME(v), m);                         \
  }                                                                \
  inline void st_##NAME##_nt(STORE_T* p, COMPUTE v, bool stream) { \
    raw_store_nt<RAW>(p, enc_##NAME(v), stream);                   \
  }                                                                \
  inline void st_##NAME##_s(STORE_T* p, vl off, COMPUTE v, vm m) { \
    raw_scatter<RAW>(p, off, enc_##NAME(v), m);                    \
  }

TLRT_VECTOR_DTYPE(f32, float, vf, vf)
TLRT_VECTOR_DTYPE(f64, double, vd, vd)
TLRT_VECTOR_DTYPE(bf16, uint16_t, vh, vf)
TLRT_VECTOR_DTYPE(f16, uint16_t, vh, vf)
TLRT_VECTOR_DTYPE(e4m3, uint8_t, vb, vf)
TLRT_VECTOR_DTYPE(e5m2, uint8_t, vb, vf)
TLRT_VECTOR_DTYPE(e2m1, uint8_t, vb, vf)
TLRT_VECTOR_DTYPE(i8, int8_t, vsb, vi)
TLRT_VECTOR_DTYPE(u8, uint8_t, vb, vi)
TLRT_VECTOR_DTYPE(i16, int16_t, vs, vi)
TLRT_VECTOR_DTYPE(u16, uint16_t, vh, vi)
TLRT_VECTOR_DTYPE(i32, int32_t, vi, vi)
TLRT_VECTOR_DTYPE(u32, uint32_t, vu, vu)
TLRT_VECTOR_DTYPE(i64, int64_t, vl, vl)
TLRT_VECTOR_DTYPE(u64, uint64_t, vul, vul)
TLRT_VECTOR_DTYPE(bool, bool, vb, vm)
#undef TLRT_VECTOR_DTYPE

// ---- selects and comparisons of 64-bit lanes (masks are 32-bit) ----
inline vf vsel(vm m, vf a, vf b) {
  return m ? a : b;
}
inline vi vsel(vm m, vi a, vi b) {
  return m ? a : b;
}
inline vu vsel(vm m, vu a, vu b) {
  return m ? a : b;
}
inline vd vsel(vm m, vd a, vd b) {
  return widen(m) ? a : b;
}
inline vl vsel(vm m, vl a, vl b) {
  return widen(m) ? a : b;
}
inline vul vsel(vm m, vul a, vul b) {
  return widen(m) ? a : b;
}

// ---- rounding to narrower float types (the value stays in a float32 lane) ----
inline vf vround_bf16(vf x) {
  return dec_bf16(enc_bf16(x));
}
inline vf vround_f16(vf x) {
  return dec_f16(enc_f16(x));
}
inline vf vround_e4m3(vf x) {
  return dec_e4m3(enc_e4m3(x));
}
inline vf vround_e5m2(vf x) {
  return dec_e5m2(enc_e5m2(x));
}
inline vf vround_e2m1(vf x) {
  return dec_e2m1(enc_e2m1(x));
}

// ---- math (lane-for-lane equal to the scalar versions in scalar.h) ----
template <class V>
inline V vmin(V a, V b) {
  return a < b ? a : b;
}
template <class V>
inline V vmax(V a, V b) {
  return a > b ? a : b;
}
// minps/maxps return the second operand unless the comparison holds: exactly the selects above (NaN
// and signed-zero cases included), in one instruction instead of a compare and a blend.
#if TESSERA_TL_VW == 16 && defined(__AVX512F__)
inline vf vmin(vf a, vf b) {
  return (vf)_mm512_min_ps((__m512)a, (__m512)b);
}
inline vf vmax(vf a, vf b) {
  return (vf)_mm512_max_ps((__m512)a, (__m512)b);
}
#elif TESSERA_TL_VW == 8 && defined(__AVX__)
inline vf vmin(vf a, vf b) {
  return (vf)_mm256_min_ps((__m256)a, (__m256)b);
}
inline vf vmax(vf a, vf b) {
  return (vf)_mm256_max_ps((__m256)a, (__m256)b);
}
#endif
inline vf vabs(vf x) {
  return (vf)((vu)x & 0x7FFFFFFFu);
}
inline vd vabs(vd x) {
  return (vd)((vul)x & 0x7FFFFFFFFFFFFFFFull);
}
inline vi vabs(vi x) {
  return x < 0 ? -x : x;
}
inline vl vabs(vl x) {
  return x < 0 ? -x : x;
}
inline vu vabs(vu x) {
  return x;
}
inline vul vabs(vul x) {
  return x;
}

// a * b + c per lane, rounded once where the target has FMA instructions (as tlrt::mad), twice where it
// has none. The width-specific intrinsics keep it one instruction: -mtune=native may split a lane loop
// into 256-bit halves.
template <class V>
inline V vfma(V a, V b, V c) {  // integers
  return a * b + c;
}
inline vf vfma(vf a, vf b, vf c) {
#if defined(__AVX512F__) && TESSERA_TL_VW == 16
  return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__) && TESSERA_TL_VW == 8
  return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#elif defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  vf r;
  for (int l = 0; l < VW; ++l) r[l] = __builtin_fmaf(a[l], b[l], c[l]);
  return r;
#else
  return a * b + c;
#endif
}
inline vd vfma(vd a, vd b, vd c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  vd r;
  for (int l = 0; l < VW; ++l) r[l] = __builtin_fma(a[l], b[l], c[l]);
  return r;
#else
  return a * b + c;
#endif
}
inline vf vexp2(vf x) {
  const vm nan = x != x, tiny = x < -126.0f;
  x = x > 128.0f ? splat<vf>(128.0f) : x;
  x = tiny ? splat<vf>(0.0f) : x;
  const float magic = 12582912.0f;
  const vf t = x + magic;
  const vi n = (vi)((vu)t - bits(magic));
  const vf f = x - (t - magic);
  vf p = splat<vf>(1.5252733804059841e-05f);
  p = vfma(p, f, splat<vf>(1.5403530393381608e-04f));
  p = vfma(p, f, splat<vf>(1.3333558146428443e-03f));
  p = vfma(p, f, splat<vf>(9.6181291076284772e-03f));
  p = vfma(p, f, splat<vf>(5.5504108664821580e-02f));
  p = vfma(p, f, splat<vf>(2.4022650695910071e-01f));
  p = vfma(p, f, splat<vf>(6.9314718055994531e-01f));
  p = vfma(p, f, splat<vf>(1.0f));
  const vf r = (vf)((vu)p + (vu)(n << 23));
  return nan ? x : (tiny ? splat<vf>(0.0f) : r);
}
inline vf vexp(vf x) {
  const vm nan = x != x, tiny = x < -87.33f;
  x = x > 88.8f ? splat<vf>(88.8f) : x;
  x = tiny ? splat<vf>(0.0f) : x;
  const float magic = 12582912.0f;
  const vf t = vfma(x, splat<vf>(1.4426950408889634f), splat<vf>(magic));
  const vf nf = t - magic;
  vi n = (vi)((vu)t - bits(magic));
  const vf r = vfma(-nf, splat<vf>(1.428606765330187e-06f), vfma(-nf, splat<vf>(0.693145751953125f), x));
  vf p = splat<vf>(1.9841269841269841e-04f);
  p = vfma(p, r, splat<vf>(1.3888888888888889e-03f));
  p = vfma(p, r, splat<vf>(8.3333333333333332e-03f));
  p = vfma(p, r, splat<vf>(4.1666666666666664e-02f));
  p = vfma(p, r, splat<vf>(1.6666666666666666e-01f));
  p = vfma(p, r, splat<vf>(0.5f));
  p = vfma(p, r, splat<vf>(1.0f));
  p = vfma(p, r, splat<vf>(1.0f));
  const vm big = n > 127;
  n = big ? splat<vi>(127) : n;
  vf res = (vf)((vu)p + (vu)(n << 23));
  res = big ? res * 2.0f : res;
  return nan ? x : (tiny ? splat<vf>(0.0f) : res);
}
inline vf vsigmoid(vf x) {
  return 1.0f / (1.0f + vexp(-x));
}
inline vf vtanh(vf x) {
  const vf a = vabs(x);
  const vf r = a > 9.0f ? splat<vf>(1.0f) : 1.0f - 2.0f / (vexp(2.0f * a) + 1.0f);
  return (vf)((vu)r | ((vu)x & 0x80000000u));
}
inline vf vdecode_e2m1(vi code) {
  const vi c = code & 7;
  const vf half = __builtin_convertvector(c, vf) * 0.5f;
  const vf pow2 = (vf)((vu)((c >> 1) + 126) << 23);
  const vf mag = c < 2 ? half : pow2 * (1.0f + __builtin_convertvector(c & 1, vf) * 0.5f);
  return (code & 8) ? -mag : mag;
}

// Functions without a vector algorithm here run lane by lane (the compiler vectorizes what it can).
#define TLRT_LANEWISE(NAME, V, FN)                \
  inline V NAME(V x) {                            \
    V r;                                          \
    for (int l = 0; l < VW; ++l) r[l] = FN(x[l]); \
    return r;                                     \
  }
TLRT_LANEWISE(vexp2, vd, std::exp2)
TLRT_LANEWISE(vexp, vd, std::exp)
TLRT_LANEWISE(vsigmoid, vd, tlrt::sigmoid)
TLRT_LANEWISE(vlog, vf, std::log)
TLRT_LANEWISE(vlog, vd, std::log)
TLRT_LANEWISE(vlog2, vf, std::log2)
TLRT_LANEWISE(vlog2, vd, std::log2)
TLRT_LANEWISE(vsqrt, vf, std::sqrt)
TLRT_LANEWISE(vsqrt, vd, std::sqrt)
TLRT_LANEWISE(vrsqrt, vf, tlrt::rsqrt)
TLRT_LANEWISE(vrsqrt, vd, tlrt::rsqrt)
TLRT_LANEWISE(vtanh, vd, std::tanh)
TLRT_LANEWISE(vfloor, vf, std::floor)
TLRT_LANEWISE(vfloor, vd, std::floor)
TLRT_LANEWISE(vceil, vf, std::ceil)
TLRT_LANEWISE(vceil, vd, std::ceil)
TLRT_LANEWISE(vtrunc, vf, std::trunc)
TLRT_LANEWISE(vtrunc, vd, std::trunc)
TLRT_LANEWISE(vround, vf, std::nearbyint)
TLRT_LANEWISE(vround, vd, std::nearbyint)
TLRT_LANEWISE(vsin, vf, std::sin)
TLRT_LANEWISE(vsin, vd, std::sin)
TLRT_LANEWISE(vcos, vf, std::cos)
TLRT_LANEWISE(vcos, vd, std::cos)
TLRT_LANEWISE(verf, vf, std::erf)
TLRT_LANEWISE(verf, vd, std::erf)
#undef TLRT_LANEWISE
inline vm visnan(vf x) {
  return x != x;
}
inline vm visnan(vd x) {
  return narrow(x != x);
}
inline vm visinf(vf x) {
  return vabs(x) == __builtin_inff();
}
inline vm visinf(vd x) {
  return narrow(vabs(x) == __builtin_inf());
}
inline vf vpow(vf a, vf b) {
  vf r;
  for (int l = 0; l < VW; ++l) r[l] = std::pow(a[l], b[l]);
  return r;
}
inline vd vpow(vd a, vd b) {
  vd r;
  for (int l = 0; l < VW; ++l) r[l] = std::pow(a[l], b[l]);
  return r;
}

// Integer floor division / modulo by a vector (Python semantics).
template <class V>
inline V vfloordiv(V a, V b) {
  V r;
  for (int l = 0; l < VW; ++l) r[l] = floordiv(a[l], b[l]);
  return r;
}
#if defined(__AVX512DQ__) && TESSERA_TL_VW == 16
// int64 floor modulo when every divisor is in [1, 2^31) (hash tables' sizes): float64 quotient steps
// by one reciprocal per 8 lanes instead of a scalar idiv per lane; false (nothing written) for other
// divisors. q1 = trunc(h * (1 / d)) is within 2^11 of h / d, so r1 = h - q1 d (wrapping) is below
// 2^42 and exact in float64; q2 = trunc(r1 * (1 / d)) leaves r2 = r1 - q2 d in [-d, d]; then one
// correction. d = 1 gives 0 (its q1 may be out of range: the conversion's defined 0x8000...).
inline bool vfloormod_small_divisors(const vl& a, const vl& b, vl* out) {
  __m512i h[2], d[2], res[2];
  std::memcpy(h, &a, sizeof(h));
  std::memcpy(d, &b, sizeof(d));
  const __m512i one = _mm512_set1_epi64(1), limit = _mm512_set1_epi64(int64_t(1) << 31);
  for (int k = 0; k < 2; ++k)
    if (_mm512_cmplt_epi64_mask(d[k], one) | _mm512_cmpge_epi64_mask(d[k], limit)) return false;
  for (int k = 0; k < 2; ++k) {
    const __m512d inv = _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_cvtepi64_pd(d[k]));
    const __m512i q1 = _mm512_cvttpd_epi64(_mm512_mul_pd(_mm512_cvtepi64_pd(h[k]), inv));
    const __m512i r1 = _mm512_sub_epi64(h[k], _mm512_mullo_epi64(q1, d[k]));
    const __m512i q2 = _mm512_cvttpd_epi64(_mm512_mul_pd(_mm512_cvtepi64_pd(r1), inv));
    __m512i r2 = _mm512_sub_epi64(r1, _mm512_mullo_epi64(q2, d[k]));
    r2 = _mm512_mask_add_epi64(r2, _mm512_cmplt_epi64_mask(r2, _mm512_setzero_si512()), r2, d[k]);
    r2 = _mm512_mask_sub_epi64(r2, _mm512_cmpge_epi64_mask(r2, d[k]), r2, d[k]);
    res[k] = _mm512_maskz_mov_epi64(_mm512_cmpneq_epi64_mask(d[k], one), r2);
  }
  std::memcpy(out, res, sizeof(res));
  return true;
}
#endif
template <class V>
inline V vfloormod(V a, V b) {
  V r;
#if defined(__AVX512DQ__) && TESSERA_TL_VW == 16
  if constexpr (std::is_same_v<V, vl>)
    if (vfloormod_small_divisors(a, b, &r)) return r;
#endif
  for (int l = 0; l < VW; ++l) r[l] = floormod(a[l], b[l]);
  return r;
}

}  // namespace tlrt
