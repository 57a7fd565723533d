// tessera/core/dtype.h - element types and bit-exact scalar conversions.
//
// Formats (OCP 8-bit float spec, MX spec for e2m1/e8m0):
//   bf16          1-8-7,  bias 127, IEEE-like (inf, NaN, subnormals)
//   f16           1-5-10, bias 15,  IEEE 754 binary16
//   f8_e4m3fn     1-4-3,  bias 7,   no inf; NaN = S.1111.111; max finite 448
//   f8_e5m2       1-5-2,  bias 15,  IEEE-like (inf, NaN); max finite 57344
//   f4_e2m1       1-2-1,  bias 1,   no inf/NaN; values {0,.5,1,1.5,2,3,4,6}; packed two per byte,
//                                   element 2i in the low nibble, 2i+1 in the high nibble
//   ue8m0         0-8-0,  bias 127, unsigned power of two 2^(e-127); 0xFF = NaN; no zero
//
// Conversions from f32 round to nearest, ties to even, and match ml_dtypes 0.7 bit for bit on every
// non-NaN input (tests/python/test_dtypes.py checks this). Out-of-range behaviour:
//   bf16, f16, e5m2: overflow -> +-inf.            e4m3fn: overflow or inf -> NaN (non-saturating);
//   e2m1: overflow or inf -> +-6 (saturating).     ue8m0: see f32_to_ue8m0.
//   Callers that want saturation for e4m3fn/e5m2 (quantisers) clamp first or use the *_sat variants.
// NaN inputs: bf16 -> 0x7FC0|sign, f16 -> payload truncated (kept non-zero) like numpy,
//   e4m3fn -> 0x7F|sign, e5m2 -> 0x7E|sign, e2m1 -> +0 (no NaN exists; documented choice), ue8m0 -> 0xFF.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tessera {

enum class DType : uint8_t {
  kF32,
  kF64,
  kBF16,
  kF16,
  kF8E4M3,  // float8_e4m3fn
  kF8E5M2,  // float8_e5m2
  kF4E2M1,  // packed two per byte; shapes count bytes unless an API says otherwise
  kUE8M0,   // one byte per scale
  kI8,
  kU8,
  kI32,
  kI64,
  kBool,
};

// Storage bits per element as laid out in memory (packed fp4 counts as 8: one byte holds two values).
int dtype_storage_bytes(DType t);
const char* dtype_name(DType t);
// Parses the names dtype_name() prints plus common aliases ("bfloat16", "float8_e4m3fn", "int32", ...).
// Throws Error(kInvalidArgument) for unknown names.
DType dtype_from_name(std::string_view name);

inline uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// ---- bf16 ----
inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(uint32_t(h) << 16);
}
inline uint16_t f32_to_bf16(float x) {
  uint32_t u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7FC0u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

namespace detail {
// Rounds the finite magnitude |x| (f32 bits without sign) to the nearest code (e << kMan | m) of a
// small float with kMan mantissa bits and bias kBias, ties to even. The result may exceed the largest
// finite code; the caller applies its overflow rule.
template <int kMan, int kBias>
inline uint32_t round_magnitude(uint32_t abs_bits) {
  constexpr int kShift = 23 - kMan;
  const int target_exp = int(abs_bits >> 23) - 127 + kBias;
  if (target_exp >= 1) {
    const uint32_t v = abs_bits - (uint32_t(127 - kBias) << 23);
    return (v + (1u << (kShift - 1)) - 1u + ((v >> kShift) & 1u)) >> kShift;
  }
  if ((abs_bits >> 23) == 0) return 0;  // f32 subnormals are far below any small-float quantum
  const uint32_t full = (abs_bits & 0x7FFFFFu) | 0x800000u;
  const int shift = kShift + 1 - target_exp;
  if (shift >= 25) return 0;  // below half the smallest subnormal
  return (full + (1u << (shift - 1)) - 1u + ((full >> shift) & 1u)) >> shift;
}
}  // namespace detail

// ---- f16 ----
float f16_to_f32(uint16_t h);
inline uint16_t f32_to_f16(float x) {
  const uint32_t u = f32_bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) {
    const uint32_t payload = (a & 0x7FFFFFu) >> 13;
    return uint16_t(sign | 0x7C00u | (payload ? payload : 1u));
  }
  if (a == 0x7F800000u) return uint16_t(sign | 0x7C00u);
  const uint32_t code = detail::round_magnitude<10, 15>(a);
  return uint16_t(sign | (code >= 0x7C00u ? 0x7C00u : code));
}

// ---- float8 e4m3fn ----
inline float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80u) << 24, e = (b >> 3) & 0xFu, m = b & 7u;
  if (e == 15 && m == 7) return f32_from_bits(sign | 0x7FC00000u);
  // Normals: e and m placed in an f32 with the bias moved from 7 to 127. Subnormals (m x 2^-9) from an
  // integer conversion, never from an f32 denormal, so MXCSR's denormals-are-zero cannot change them.
  const float mag = e != 0 ? f32_from_bits(((e + 120) << 23) | m << 20) : float(m) * 0x1p-9f;
  return f32_from_bits(sign | f32_bits(mag));
}
inline uint8_t f32_to_e4m3(float x) {
  const uint32_t u = f32_bits(x), sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return uint8_t(sign | 0x7Fu);
  const uint32_t code = detail::round_magnitude<3, 7>(a);
  return uint8_t(sign | (code > 0x7Eu ? 0x7Fu : code));
}
// Saturating variant: finite values beyond +-448 become +-448; NaN stays NaN; inf -> +-448.
inline uint8_t f32_to_e4m3_sat(float x) {
  const uint32_t u = f32_bits(x), sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint8_t(sign | 0x7Fu);
  if (a >= 0x43E00000u) return uint8_t(sign | 0x7Eu);  // |x| >= 448
  return uint8_t(sign | detail::round_magnitude<3, 7>(a));
}

// ---- float8 e5m2 ----
inline float e5m2_to_f32(uint8_t b) {
  return f16_to_f32(uint16_t(b) << 8);
}
inline uint8_t f32_to_e5m2(float x) {
  const uint32_t u = f32_bits(x), sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint8_t(sign | 0x7Eu);
  if (a == 0x7F800000u) return uint8_t(sign | 0x7Cu);
  const uint32_t code = detail::round_magnitude<2, 15>(a);
  return uint8_t(sign | (code >= 0x7Cu ? 0x7Cu : code));
}
inline uint8_t f32_to_e5m2_sat(float x) {
  const uint32_t u = f32_bits(x), sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint8_t(sign | 0x7Eu);
  const uint32_t code = a >= 0x7F800000u ? 0x7Cu : detail::round_magnitude<2, 15>(a);
  return uint8_t(sign | (code >= 0x7Cu ? 0x7Bu : code));
}

// ---- float4 e2m1 (one value in the low nibble of the argument / result) ----
inline float e2m1_to_f32(uint8_t nibble) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kMag[nibble & 7u];
  return (nibble & 8u) ? -v : v;
}
inline uint8_t f32_to_e2m1(float x) {
  const uint32_t u = f32_bits(x), sign = (u >> 28) & 0x8u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0;
  if (a >= 0x7F800000u) return uint8_t(sign | 7u);
  const uint32_t code = detail::round_magnitude<1, 1>(a);
  return uint8_t(sign | (code > 7u ? 7u : code));
}
// DeepGEMM's reference FP4 quantiser: the code is the number of midpoints {.25,.75,1.25,1.75,2.5,3.5,5}
// strictly below |x| (ties go to the smaller magnitude); no negative zero; NaN -> 0.
inline uint8_t f32_to_e2m1_deepgemm(float x) {
  const float a = x < 0 ? -x : x;
  const uint8_t code =
      uint8_t((a > 0.25f) + (a > 0.75f) + (a > 1.25f) + (a > 1.75f) + (a > 2.5f) + (a > 3.5f) + (a > 5.0f));
  return (x < 0 && code != 0) ? uint8_t(code | 8u) : code;
}

// ---- ue8m0 ----
inline float ue8m0_to_f32(uint8_t e) {
  if (e == 0xFF) return f32_from_bits(0x7FC00000u);
  if (e == 0) return f32_from_bits(0x00400000u);  // 2^-127 is an f32 subnormal
  return f32_from_bits(uint32_t(e) << 23);
}
// Rounds to the nearest power of two with ties (mantissa exactly 1.5) going up, like ml_dtypes:
// NaN, inf, zero, negative numbers and values that round above 2^127 give 0xFF (NaN).
inline uint8_t f32_to_ue8m0(float x) {
  const uint32_t u = f32_bits(x);
  if ((u >> 31) || u == 0 || u >= 0x7F800000u) return 0xFF;
  uint32_t e = u >> 23;
  if (e == 0) return u >= 0x00600000u ? 1 : 0;  // f32 subnormals: 1.5 * 2^-127 and above round up
  if (u & 0x400000u) ++e;                       // mantissa >= 0.5 rounds up
  return e >= 0xFF ? 0xFF : uint8_t(e);
}
// DeepGEMM's ceil_to_ue8m0: the smallest power of two >= x for x > 0, exponent clamped to [1, 254].
inline uint8_t f32_to_ue8m0_ceil(float x) {
  const uint32_t u = f32_bits(x) & 0x7FFFFFFFu;
  uint32_t e = u >> 23;
  if ((u & 0x7FFFFFu) != 0 && e != 0) ++e;
  if (e < 1) e = 1;
  if (e > 254) e = 254;
  return uint8_t(e);
}

}  // namespace tessera
