// Scalar element reads of GEMM sources as fp32, shared by the fp32-FMA kernel folders (avx2/, avx512/,
// neon/) and the bf16 sets' fp16 split (avx512bf16/).
// Every function is static: each ISA translation unit gets its own copy, so nothing compiled with ISA
// flags can escape (backends/cpu/README.md, rule 1).
#pragma once

#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu::scalar_convert {

// Whether one of the n e4m3 codes at w is a NaN (S.1111.111): the kernels whose conversion has no NaN
// of its own look for it before (or after) using the codes.
static inline bool e4m3_codes_hold_nan(const uint8_t* w, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if ((w[i] & 0x7F) == 0x7F) return true;
  return false;
}

// Exponent k when scale is exactly 2^k (positive) with lo <= k <= hi; false otherwise. Callers choose
// the range that keeps their scaled values (and sums) normal.
static inline bool power_of_two_exponent(float scale, int lo, int hi, int* k) {
  uint32_t u;
  memcpy(&u, &scale, 4);
  if ((u & 0x807FFFFFu) != 0) return false;  // negative, or not a power of two
  const int e = int(u >> 23) - 127;
  if (e < lo || e > hi) return false;
  *k = e;
  return true;
}

// Exact float8_e4m3fn -> fp32. Uses an integer-to-float conversion for subnormal codes instead of
// rescaling an fp32 denormal, so the result does not depend on the MXCSR denormals-are-zero flag.
static inline float e4m3_to_f32_scalar(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80) << 24, mag = b & 0x7Fu;
  uint32_t bits;
  if (mag == 0x7F) {
    bits = 0x7FC00000u;
  } else if (mag < 8) {
    const float sub = float(int(mag)) * (1.0f / 512);  // m * 2^-9
    memcpy(&bits, &sub, 4);
  } else {
    bits = (mag << 20) + (120u << 23);  // exponent e - 7 + 127, mantissa moved to the top
  }
  bits |= sign;
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

// Exact binary16 -> fp32 (bits in the low 16). Subnormal codes go through an integer-to-float
// conversion (m * 2^-24 is a normal fp32), so MXCSR's denormals-are-zero flag cannot change them.
static inline float f16_to_f32_scalar(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, mag = h & 0x7FFFu;
  uint32_t bits;
  if (mag >= 0x7C00u) {
    bits = (mag << 13) | 0x7F800000u;  // inf / NaN (payload kept)
  } else if (mag < 0x400u) {
    const float sub = float(int(mag)) * (1.0f / 16777216);
    memcpy(&bits, &sub, 4);
  } else {
    bits = (mag << 13) + (112u << 23);  // exponent e - 15 + 127
  }
  bits |= sign;
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

// float8_e5m2 is the top byte of a binary16.
static inline float e5m2_to_f32_scalar(uint8_t b) {
  return f16_to_f32_scalar(uint32_t(b) << 8);
}

static inline float src_to_f32(const GemmSrc& s, int64_t r, int64_t k) {
  const int64_t off = r * s.stride_r + k * s.stride_k;
  switch (s.type) {
    case GemmSrcType::kBF16: {
      const uint32_t bits = uint32_t(static_cast<const uint16_t*>(s.data)[off]) << 16;
      float out;
      memcpy(&out, &bits, 4);
      return out;
    }
    case GemmSrcType::kE4M3:
      return e4m3_to_f32_scalar(static_cast<const uint8_t*>(s.data)[off]);
    case GemmSrcType::kF16:
      return f16_to_f32_scalar(static_cast<const uint16_t*>(s.data)[off]);
    case GemmSrcType::kE5M2:
      return e5m2_to_f32_scalar(static_cast<const uint8_t*>(s.data)[off]);
    default:
      return static_cast<const float*>(s.data)[off];
  }
}

static inline int src_elem_bytes(GemmSrcType t) {
  switch (t) {
    case GemmSrcType::kBF16:
    case GemmSrcType::kF16:
      return 2;
    case GemmSrcType::kE4M3:
    case GemmSrcType::kE5M2:
      return 1;
    default:
      return 4;
  }
}

}  // namespace tessera::cpu::scalar_convert
