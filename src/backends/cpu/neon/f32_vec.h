// The neon folder's fp32 vector traits (4 lanes of a 128-bit q register), the width argument of the
// width templates in backends/cpu/*-inl.h (here: GEMM packing, micro-kernel and source conversion).
// NEON has no masked loads or stores, so partial vectors go through a zeroed stack copy, as at avx2.
// Private to this folder and inside an anonymous namespace: every copy stays in its file (README.md,
// rule 1; NEON is AArch64's baseline, but the discipline is the same as on x86).
#pragma once

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

namespace tessera::cpu {
namespace {

struct NeonF32 {
  using Vec = float32x4_t;
  using IVec = int32x4_t;    // 4 x int32
  using IMask = uint32x4_t;  // lane compare results (all ones / zero)
  using LoadTail = int64_t;  // a partial load: the number of leading elements to read
  using StoreTail = int;     // a partial store: the number of leading lanes to write, in [0, 4]
  static constexpr int kLanes = 4;

  static Vec zero() { return vdupq_n_f32(0.0f); }
  static Vec set1(float x) { return vdupq_n_f32(x); }
  static Vec load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, Vec v) { vst1q_f32(p, v); }
  static Vec add(Vec a, Vec b) { return vaddq_f32(a, b); }
  static Vec mul(Vec a, Vec b) { return vmulq_f32(a, b); }
  static Vec fma(Vec a, Vec b, Vec c) { return vfmaq_f32(c, a, b); }  // a * b + c, one rounding

  // Lanes summed in order 0..3 (not vaddvq_f32's pairwise order), like avx2's 0..7.
  static float reduce_add(Vec v) {
    float sum = vgetq_lane_f32(v, 0);
    sum += vgetq_lane_f32(v, 1);
    sum += vgetq_lane_f32(v, 2);
    sum += vgetq_lane_f32(v, 3);
    return sum;
  }

  // Tails: a count for loads (clamped to [0, 4] by the loads), a clamped count for stores.
  static LoadTail load_tail(int64_t valid) { return valid; }
  static StoreTail store_tail(int64_t valid) { return valid <= 0 ? 0 : valid >= 4 ? 4 : int(valid); }
  static void store_part(float* p, StoreTail n, Vec v) {
    float lanes[4];
    vst1q_f32(lanes, v);
    memcpy(p, lanes, size_t(n) * sizeof(float));
  }

  // Source elements widened to int32 lanes (all 4 read) and their partial forms (the first `valid`;
  // the rest read as zero and are not accessed).
  static IVec load_u8(const void* p) {
    uint32_t bytes;
    memcpy(&bytes, p, 4);
    const uint16x8_t h = vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(bytes)));
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(h)));
  }
  static IVec load_u16(const void* p) {
    return vreinterpretq_s32_u32(vmovl_u16(vld1_u16(static_cast<const uint16_t*>(p))));
  }
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
  static IVec iset1(int32_t x) { return vdupq_n_s32(x); }
  static IVec iand(IVec a, IVec b) { return vandq_s32(a, b); }
  static IVec ior(IVec a, IVec b) { return vorrq_s32(a, b); }
  static IVec iadd(IVec a, IVec b) { return vaddq_s32(a, b); }
  template <int kBits>
  static IVec ishl(IVec a) {
    return vshlq_n_s32(a, kBits);
  }
  static Vec to_f32(IVec a) { return vcvtq_f32_s32(a); }
  static Vec as_f32(IVec a) { return vreinterpretq_f32_s32(a); }
  static IVec as_i32(Vec a) { return vreinterpretq_s32_f32(a); }
  static IMask lt(IVec a, IVec b) { return vcltq_s32(a, b); }
  static IMask eq(IVec a, IVec b) { return vceqq_s32(a, b); }
  static IVec select(IMask m, IVec if_set, IVec if_clear) { return vbslq_s32(m, if_set, if_clear); }

  // In-register transpose: afterwards r[c] lane i holds what r[i] lane c held. trn1/trn2 on 32-bit
  // lanes pair rows (0,1) and (2,3); trn1/trn2 on 64-bit halves then join the pairs.
  static void transpose(Vec r[4]) {
    const float32x4_t t0 = vtrn1q_f32(r[0], r[1]);  // r0.0 r1.0 r0.2 r1.2
    const float32x4_t t1 = vtrn2q_f32(r[0], r[1]);  // r0.1 r1.1 r0.3 r1.3
    const float32x4_t t2 = vtrn1q_f32(r[2], r[3]);  // r2.0 r3.0 r2.2 r3.2
    const float32x4_t t3 = vtrn2q_f32(r[2], r[3]);  // r2.1 r3.1 r2.3 r3.3
    r[0] = join_low(t0, t2);
    r[1] = join_low(t1, t3);
    r[2] = join_high(t0, t2);
    r[3] = join_high(t1, t3);
  }

 private:
  // Lanes 0-1 of a then lanes 0-1 of b / lanes 2-3 of a then lanes 2-3 of b.
  static Vec join_low(Vec a, Vec b) {
    return vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(a), vreinterpretq_f64_f32(b)));
  }
  static Vec join_high(Vec a, Vec b) {
    return vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(a), vreinterpretq_f64_f32(b)));
  }

  // `full` applied to p when all 4 elements exist, else to a zeroed copy of the first `valid`.
  template <class Full>
  static auto load_part(const void* p, LoadTail valid, int elem_bytes, Full full) -> decltype(full(p)) {
    if (valid >= 4) return full(p);
    alignas(16) unsigned char tmp[16] = {};
    if (valid > 0) memcpy(tmp, p, size_t(valid) * elem_bytes);
    return full(tmp);
  }
};

}  // namespace
}  // namespace tessera::cpu
