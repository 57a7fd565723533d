// GEMM source elements (bf16, fp16, e4m3, e5m2, fp32) loaded as fp32 vectors, written once over the vector width:
// V is a folder's traits (avx2/f32_vec.h, avx512/f32_vec.h). Included by the ISA files after their
// traits header; everything here has internal linkage, so each file compiles its own copy with its own
// flags (README.md, rule 1 and "Width templates").
#pragma once

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

// The same conversion as scalar_convert::e4m3_to_f32_scalar on codes zero-extended to int32 lanes.
template <class V>
typename V::Vec e4m3_to_f32(typename V::IVec x) {
  const auto mag = V::iand(x, V::iset1(0x7F));
  const auto sign = V::template ishl<24>(V::iand(x, V::iset1(0x80)));
  auto bits = V::iadd(V::template ishl<20>(mag), V::iset1(120 << 23));  // exponent e - 7 + 127
  const auto sub = V::mul(V::to_f32(mag), V::set1(1.0f / 512));         // subnormal: m * 2^-9
  bits = V::select(V::lt(mag, V::iset1(8)), V::as_i32(sub), bits);
  bits = V::select(V::eq(mag, V::iset1(0x7F)), V::iset1(0x7FC00000), bits);
  return V::as_f32(V::ior(bits, sign));
}

// The same conversion as scalar_convert::f16_to_f32_scalar on binary16 bits zero-extended to int32
// lanes (e5m2 codes shifted up by 8 are binary16 bits).
template <class V>
typename V::Vec f16_to_f32(typename V::IVec x) {
  const auto mag = V::iand(x, V::iset1(0x7FFF));
  const auto sign = V::template ishl<16>(V::iand(x, V::iset1(0x8000)));
  const auto shifted = V::template ishl<13>(mag);
  auto bits = V::iadd(shifted, V::iset1(112 << 23));                  // exponent e - 15 + 127
  const auto sub = V::mul(V::to_f32(mag), V::set1(1.0f / 16777216));  // subnormal: m * 2^-24
  bits = V::select(V::lt(mag, V::iset1(0x400)), V::as_i32(sub), bits);
  bits = V::select(V::lt(mag, V::iset1(0x7C00)), bits, V::ior(shifted, V::iset1(0x7F800000)));  // inf / NaN
  return V::as_f32(V::ior(bits, sign));
}

template <class V>
typename V::Vec bf16_to_f32(typename V::IVec x) {
  return V::as_f32(V::template ishl<16>(x));
}

// V::kLanes consecutive source elements at p as fp32 (all are read). T is a compile-time type, so
// the packing loops that call this have no per-vector branch.
template <class V, GemmSrcType T>
typename V::Vec load_src(const void* p) {
  if constexpr (T == GemmSrcType::kBF16) {
    return bf16_to_f32<V>(V::load_u16(p));
  } else if constexpr (T == GemmSrcType::kE4M3) {
    return e4m3_to_f32<V>(V::load_u8(p));
  } else if constexpr (T == GemmSrcType::kF16) {
    return f16_to_f32<V>(V::load_u16(p));
  } else if constexpr (T == GemmSrcType::kE5M2) {
    return f16_to_f32<V>(V::template ishl<8>(V::load_u8(p)));
  } else {
    return V::load(static_cast<const float*>(p));
  }
}

// The elements `tail` selects (V::load_tail); the others read as zero and are not accessed.
template <class V, GemmSrcType T>
typename V::Vec load_src(const void* p, typename V::LoadTail tail) {
  if constexpr (T == GemmSrcType::kBF16) {
    return bf16_to_f32<V>(V::load_u16(p, tail));
  } else if constexpr (T == GemmSrcType::kE4M3) {
    return e4m3_to_f32<V>(V::load_u8(p, tail));
  } else if constexpr (T == GemmSrcType::kF16) {
    return f16_to_f32<V>(V::load_u16(p, tail));
  } else if constexpr (T == GemmSrcType::kE5M2) {
    return f16_to_f32<V>(V::template ishl<8>(V::load_u8(p, tail)));
  } else {
    return V::load(static_cast<const float*>(p), tail);
  }
}

}  // namespace
}  // namespace tessera::cpu
