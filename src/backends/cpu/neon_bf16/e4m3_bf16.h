// Helpers of the neon_bf16 folder: e4m3 -> bf16 in NEON registers (decode GEMV, GEMM packing, MLA, MQA
// logits), exact for every code (every e4m3 value, subnormals and NaN included, is a bf16 value), and
// BFDOT by a lane chosen at run time. Internal linkage only (rule 1 of README.md): each including file
// gets its own copy.
#pragma once

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/scalar_convert.h"

namespace tessera::cpu {
namespace {

// e4m3 -> bf16 bits of a magnitude m (exponent e = m >> 3, mantissa m & 7): for e >= 1 the fields
// move as a block, bits = (m << 4) + (120 << 7) (the exponent bias grows from 7 to 127), which per byte
// is hi = (m >> 4) + 0x3C, lo = m << 4. Subnormals (m < 8) and the first binade are a 16-entry lookup
// (TBX keeps the formula's bytes for m >= 16), NaN (m = 0x7F) a compare and select.
struct SmallCodes {
  uint8_t lo[16], hi[16];
};
inline const SmallCodes& small_codes() {
  static const SmallCodes t = [] {
    SmallCodes r;
    for (int c = 0; c < 16; ++c) {
      const float f = scalar_convert::e4m3_to_f32_scalar(uint8_t(c));
      uint32_t u;
      memcpy(&u, &f, 4);
      r.lo[c] = uint8_t(u >> 16);  // the low 16 bits are zero: no rounding
      r.hi[c] = uint8_t(u >> 24);
    }
    return r;
  }();
  return t;
}

struct Tables {
  uint8x16_t lo, hi;
};
inline Tables load_tables() {
  const SmallCodes& t = small_codes();
  return {vld1q_u8(t.lo), vld1q_u8(t.hi)};
}

// 16 e4m3 codes -> bf16 values 0..7 (v0) and 8..15 (v1), in order.
inline void e4m3x16_to_bf16(const Tables& t, uint8x16_t codes, bfloat16x8_t* v0, bfloat16x8_t* v1) {
  const uint8x16_t mag = vandq_u8(codes, vdupq_n_u8(0x7F));
  const uint8x16_t nan = vceqq_u8(mag, vdupq_n_u8(0x7F));
  uint8x16_t hi = vqtbx1q_u8(vaddq_u8(vshrq_n_u8(mag, 4), vdupq_n_u8(0x3C)), t.hi, mag);
  uint8x16_t lo = vqtbx1q_u8(vshlq_n_u8(mag, 4), t.lo, mag);
  hi = vorrq_u8(vbslq_u8(nan, vdupq_n_u8(0x7F), hi), vandq_u8(codes, vdupq_n_u8(0x80)));
  lo = vbslq_u8(nan, vdupq_n_u8(0xC0), lo);
  *v0 = vreinterpretq_bf16_u8(vzip1q_u8(lo, hi));
  *v1 = vreinterpretq_bf16_u8(vzip2q_u8(lo, hi));
}

// The bf16 bits of every e4m3 code, by the same rules (for operands converted once per call: the GEMV's
// activations, the GEMM's packed panels).
struct CodeBits {
  uint16_t bits[256];
};
inline const CodeBits& code_bits() {
  static const CodeBits t = [] {
    CodeBits r;
    const Tables tables = load_tables();
    for (int c = 0; c < 256; c += 16) {
      uint8_t codes[16];
      for (int i = 0; i < 16; ++i) codes[i] = uint8_t(c + i);
      bfloat16x8_t v0, v1;
      e4m3x16_to_bf16(tables, vld1q_u8(codes), &v0, &v1);
      vst1q_u16(r.bits + c, vreinterpretq_u16_bf16(v0));
      vst1q_u16(r.bits + c + 8, vreinterpretq_u16_bf16(v1));
    }
    return r;
  }();
  return t;
}

// One BFDOT of a by the K pair in lane `lane` of b (vbfdotq_laneq_f32 needs the lane as an immediate).
inline float32x4_t bfdot_lane(float32x4_t acc, bfloat16x8_t a, bfloat16x8_t b, int lane) {
  switch (lane) {
    case 0:
      return vbfdotq_laneq_f32(acc, a, b, 0);
    case 1:
      return vbfdotq_laneq_f32(acc, a, b, 1);
    case 2:
      return vbfdotq_laneq_f32(acc, a, b, 2);
    default:
      return vbfdotq_laneq_f32(acc, a, b, 3);
  }
}

// acc[r][v] += query vector v (8 bf16: one K pair of 4 query rows or heads) of K pairs p .. p + 3, each
// times its pair of key register k[r] (K values 2p .. 2p + 7 of key r). q points at pair p's vectors,
// pair_pitch bf16 values apart. The scores of the MLA set and the MQA logits rows share it.
template <int R, int NV>
inline void dot_key_quad(float32x4_t (&acc)[R][NV], const bfloat16x8_t (&k)[R], const uint16_t* q, int64_t pair_pitch) {
#pragma GCC unroll 4
  for (int l = 0; l < 4; ++l) {
    const uint16_t* ql = q + l * pair_pitch;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const bfloat16x8_t qv = vreinterpretq_bf16_u16(vld1q_u16(ql + 8 * v));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][v] = bfdot_lane(acc[r][v], qv, k[r], l);
    }
  }
}

}  // namespace
}  // namespace tessera::cpu
