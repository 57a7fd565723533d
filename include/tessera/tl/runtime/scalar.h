// tessera/tl/runtime/scalar.h - scalar helpers of generated kernels: storage conversions (bit-exact with
// tessera/core/dtype.h: round to nearest even, same NaN/overflow rules) and math functions whose results
// match the vector versions in vector.h lane for lane.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tlrt {

inline uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// ---- bfloat16 ----
inline float bf16_to_f32(uint16_t h) {
  return from_bits(uint32_t(h) << 16);
}
inline uint16_t f32_to_bf16(float x) {
  uint32_t u = bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7FC0u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float round_bf16(float x) {
  return bf16_to_f32(f32_to_bf16(x));
}

// Rounds |x| (f32 bits without sign) to the code (e << man | m) of a small float, ties to even.
template <int kMan, int kBias>
inline uint32_t round_small(uint32_t a) {
  constexpr int kShift = 23 - kMan;
  const int te = int(a >> 23) - 127 + kBias;
  if (te >= 1) {
    const uint32_t v = a - (uint32_t(127 - kBias) << 23);
    return (v + (1u << (kShift - 1)) - 1u + ((v >> kShift) & 1u)) >> kShift;
  }
  if ((a >> 23) == 0) return 0;
  const uint32_t full = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = kShift + 1 - te;
  if (shift >= 25) return 0;
  return (full + (1u << (shift - 1)) - 1u + ((full >> shift) & 1u)) >> shift;
}

// ---- float16 ----
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return from_bits(sign | 0x7F800000u | (m << 13));
  const float normal = from_bits((((e << 10) | m) << 13) + (112u << 23));  // as vector.h's dec_half_bits
  return from_bits(sign | bits(e == 0 ? normal * 2.0f - 0x1p-14f : normal));
}
inline uint16_t f32_to_f16(float x) {
  const uint32_t u = bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) {
    const uint32_t p = (a & 0x7FFFFFu) >> 13;
    return uint16_t(sign | 0x7C00u | (p ? p : 1u));
  }
  if (a == 0x7F800000u) return uint16_t(sign | 0x7C00u);
  const uint32_t code = round_small<10, 15>(a);
  return uint16_t(sign | (code >= 0x7C00u ? 0x7C00u : code));
}
inline float round_f16(float x) {
  return f16_to_f32(f32_to_f16(x));
}

// ---- float8 e4m3fn (no inf; 0x7F / 0xFF are NaN; overflow -> NaN) ----
inline float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80u) << 24;
  if ((b & 0x7Fu) == 0x7Fu) return from_bits(sign | 0x7FC00000u);
  const uint32_t m = b & 0x7Fu;
  const float normal = from_bits((m << 20) + (120u << 23));  // same steps as vector.h's dec_e4m3
  return from_bits(sign | bits(m < 8u ? normal * 2.0f - 0x1p-6f : normal));
}
inline uint8_t f32_to_e4m3(float x) {
  const uint32_t u = bits(x), sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return uint8_t(sign | 0x7Fu);
  const uint32_t code = round_small<3, 7>(a);
  return uint8_t(sign | (code > 0x7Eu ? 0x7Fu : code));
}
inline float round_e4m3(float x) {
  return e4m3_to_f32(f32_to_e4m3(x));
}

// ---- float8 e5m2 ----
inline float e5m2_to_f32(uint8_t b) {
  return f16_to_f32(uint16_t(uint16_t(b) << 8));
}
inline uint8_t f32_to_e5m2(float x) {
  const uint32_t u = bits(x), sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint8_t(sign | 0x7Eu);
  if (a == 0x7F800000u) return uint8_t(sign | 0x7Cu);
  const uint32_t code = round_small<2, 15>(a);
  return uint8_t(sign | (code >= 0x7Cu ? 0x7Cu : code));
}
inline float round_e5m2(float x) {
  return e5m2_to_f32(f32_to_e5m2(x));
}

// ---- float4 e2m1 (a code in the low nibble) ----
inline float decode_e2m1(int32_t code) {
  // magnitude of code c = (c < 2) ? c / 2 : 2^((c >> 1) - 1) * (1 + (c & 1) / 2)
  const uint32_t c = uint32_t(code) & 7u;
  const float mag = c < 2 ? 0.5f * float(c) : from_bits(((c >> 1) + 126u) << 23) * (1.0f + 0.5f * float(c & 1u));
  return (code & 8) ? -mag : mag;
}
// Stored float4 e2m1 values: rounded to nearest even, saturated at +-6 (inf too), NaN -> 0 (e2m1 has
// no NaN or inf), as tessera's FP4 encoder (tessera/core/dtype.h) and CUDA's satfinite conversion.
inline float e2m1_to_f32(uint8_t code) {
  return decode_e2m1(code & 15);
}
inline uint8_t f32_to_e2m1(float x) {
  const uint32_t u = bits(x), sign = (u >> 28) & 0x8u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0;
  const uint32_t code = a == 0x7F800000u ? 7u : round_small<1, 1>(a);
  return uint8_t(sign | (code > 7u ? 7u : code));
}
inline float round_e2m1(float x) {
  return e2m1_to_f32(f32_to_e2m1(x));
}

// ---- integer helpers (Python semantics: floor division) ----
// Defined for every divisor, as numpy's integer // and % are: x // 0 = x % 0 = 0, MIN // -1 = MIN
// (wrapping), MIN % -1 = 0. x86's division traps on those, and vector code computes lanes a GPU thread
// would skip: masked-off tail lanes and untaken branches hold divisors of 0.
template <class T>
inline bool division_traps(T a, T b) {
  if (b == 0) return true;
  if constexpr (T(-1) < T(0)) return b == T(-1) && a == T(T(1) << (sizeof(T) * 8 - 1));
  return false;
}
template <class T>
inline T floordiv(T a, T b) {
  if (__builtin_expect(division_traps(a, b), 0)) return b == 0 ? T(0) : a;
  const T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <class T>
inline T floormod(T a, T b) {
  if (__builtin_expect(division_traps(a, b), 0)) return T(0);
  const T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// min / max with the lane semantics of the vector versions (a NaN in `a` selects b)
template <class T>
inline T min(T a, T b) {
  return a < b ? a : b;
}
template <class T>
inline T max(T a, T b) {
  return a > b ? a : b;
}

// a * b + c rounded once where the target has FMA instructions, twice where it has none (the scalar
// level). Kernels compile with -ffp-contract=off, so a plain a * b + c always rounds twice (as torch does);
// the math below asks for the fused form where it wants it.
inline float mad(float a, float b, float c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// ---- math: exp2/exp use the same polynomial as the vector versions ----
inline float exp2(float x) {
  if (x != x) return x;
  if (x < -126.0f) return 0.0f;
  if (x > 128.0f) x = 128.0f;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low mantissa bits
  const float t = x + magic;
  const int32_t n = int32_t(bits(t) - bits(magic));
  const float f = x - (t - magic);  // in [-0.5, 0.5]
  // 2^f = e^(f ln2): Taylor series to degree 7 (relative error < 5e-9 on [-0.5, 0.5])
  float p = 1.5252733804059841e-05f;
  p = mad(p, f, 1.5403530393381608e-04f);
  p = mad(p, f, 1.3333558146428443e-03f);
  p = mad(p, f, 9.6181291076284772e-03f);
  p = mad(p, f, 5.5504108664821580e-02f);
  p = mad(p, f, 2.4022650695910071e-01f);
  p = mad(p, f, 6.9314718055994531e-01f);
  p = mad(p, f, 1.0f);
  return from_bits(bits(p) + uint32_t(n << 23));
}
inline float exp(float x) {
  // e^x = 2^(x log2 e) with the product split so the rounding of x * log2(e) does not hurt large |x|
  if (x != x) return x;
  if (x < -87.33f) return 0.0f;  // below the smallest normal float (results that would be subnormal flush to 0)
  if (x > 88.8f) x = 88.8f;
  const float magic = 12582912.0f;
  const float t = mad(x, 1.4426950408889634f, magic);
  const float nf = t - magic;
  const int32_t n = int32_t(bits(t) - bits(magic));
  const float r = mad(-nf, 1.428606765330187e-06f, mad(-nf, 0.693145751953125f, x));  // x - n ln2, in [-ln2/2, ln2/2]
  float p = 1.9841269841269841e-04f;
  p = mad(p, r, 1.3888888888888889e-03f);
  p = mad(p, r, 8.3333333333333332e-03f);
  p = mad(p, r, 4.1666666666666664e-02f);
  p = mad(p, r, 1.6666666666666666e-01f);
  p = mad(p, r, 0.5f);
  p = mad(p, r, 1.0f);
  p = mad(p, r, 1.0f);
  if (n > 127) return from_bits(bits(p) + uint32_t(127 << 23)) * 2.0f;
  return from_bits(bits(p) + uint32_t(n << 23));
}
// tanh(x) = sign(x) (1 - 2 / (e^(2|x|) + 1)): absolute error below 2e-7 (not relative: values near 0
// carry the rounding error of 1 - ...).
inline float tanh(float x) {
  const float a = std::fabs(x);
  const float r = a > 9.0f ? 1.0f : 1.0f - 2.0f / (tlrt::exp(2.0f * a) + 1.0f);
  return std::copysign(r, x);
}
inline double tanh(double x) {
  return std::tanh(x);
}
inline double exp2(double x) {
  return std::exp2(x);
}
inline double exp(double x) {
  return std::exp(x);
}
inline float rsqrt(float x) {
  return 1.0f / std::sqrt(x);
}
inline double rsqrt(double x) {
  return 1.0 / std::sqrt(x);
}
inline float sigmoid(float x) {
  return 1.0f / (1.0f + tlrt::exp(-x));
}
inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

}  // namespace tlrt
