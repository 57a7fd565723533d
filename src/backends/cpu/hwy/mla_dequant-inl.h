// Row conversions of the Highway MLA set, all into fp32 rows: FP8 KV-cache tokens (layouts: FlashMLA's API,
// docs/attention.md) and bf16/fp16 query or K rows. Every dequantised value is e4m3 -> fp32, times the tile
// scale in fp32, rounded to bf16 (nearest even; NaN -> quiet NaN) and widened back: the same bits as the
// scalar set and the bf16 values the avx512bf16 set computes with.
#if defined(TESSERA_HWY_MLA_DEQUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_MLA_DEQUANT_INL_H_
#undef TESSERA_HWY_MLA_DEQUANT_INL_H_
#else
#define TESSERA_HWY_MLA_DEQUANT_INL_H_
#endif

#include <hwy/highway.h>
#include <string.h>

#include "backends/cpu/scalar_convert.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {  // included by mla_kernels.cc only: nothing leaves its translation unit

// One vector of e4m3 codes (as int32 lanes) -> fp32.
template <class D>
hn::Vec<D> e4m3_to_f32(D d, hn::Vec<hn::RebindToSigned<D>> code) {
  const hn::RebindToSigned<D> di;
  const auto mag = hn::And(code, hn::Set(di, 0x7F));
  // e and m placed in an fp32 and rescaled by 2^(127-7): exact for normals and subnormals alike.
  const auto value = hn::Mul(hn::BitCast(d, hn::ShiftLeft<20>(mag)), hn::Set(d, 0x1p120f));
  const auto bits = hn::IfThenElse(hn::Eq(mag, hn::Set(di, 0x7F)), hn::Set(di, 0x7FC00000), hn::BitCast(di, value));
  return hn::BitCast(d, hn::Or(bits, hn::ShiftLeft<24>(hn::And(code, hn::Set(di, 0x80)))));
}

// fp32 -> nearest-even bf16 -> fp32 (NaN -> quiet NaN with its sign).
template <class D>
hn::Vec<D> round_to_bf16(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto u = hn::BitCast(di, x);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(di, 1));
  const auto rounded = hn::And(hn::Add(u, hn::Add(lsb, hn::Set(di, 0x7FFF))), hn::Set(di, int32_t(0xFFFF0000u)));
  const auto abs = hn::And(u, hn::Set(di, 0x7FFFFFFF));
  const auto quiet = hn::Or(hn::And(u, hn::Set(di, int32_t(0x80000000u))), hn::Set(di, 0x7FC00000));
  return hn::BitCast(d, hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x7F800000)), quiet, rounded));
}

// Whether every e4m3 value (2^-9 .. 448 in magnitude) times `scale` is exact in bf16 already: scale a
// power of two 2^k with |k| <= 100, so the products stay normal and keep e4m3's 4 significant bits.
// UE8M0 scales (MODEL1's, and V32's in DeepSeek's checkpoints) always are, bar the extremes.
bool exact_in_bf16(float scale) {
  int k;
  return scalar_convert::power_of_two_exponent(scale, -100, 100, &k);
}

// n (a multiple of the vector length) e4m3 codes times `scale` -> fp32 values of bf16 precision. With a
// scale exact_in_bf16 the rounding to bf16 changes no bit and is skipped.
template <bool kRound>
void dequant_e4m3_as(const uint8_t* src, int n, float scale, float* dst) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const int lanes = int(hn::Lanes(d));
  const auto s = hn::Set(d, scale);
  for (int i = 0; i < n; i += lanes) {
    const auto code = hn::PromoteTo(di, hn::LoadU(d8, src + i));
    const auto value = hn::Mul(e4m3_to_f32(d, code), s);
    hn::StoreU(kRound ? round_to_bf16(d, value) : value, d, dst + i);
  }
}
void dequant_e4m3(const uint8_t* src, int n, float scale, float* dst) {
  if (exact_in_bf16(scale))
    dequant_e4m3_as<false>(src, n, scale, dst);
  else
    dequant_e4m3_as<true>(src, n, scale, dst);
}

// n bf16 values (a multiple of the vector length) -> fp32.
void bf16_to_f32_row(const uint16_t* src, int n, float* dst) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint16_t, decltype(d)> d16;
  const int lanes = int(hn::Lanes(d));
  for (int i = 0; i < n; i += lanes)
    hn::StoreU(hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(di, hn::LoadU(d16, src + i)))), d, dst + i);
}

void mla_dequant_v32(const uint8_t* token, void* row) {
  float* out = static_cast<float*>(row);
  float scales[4];
  memcpy(scales, token + 512, sizeof(scales));
  for (int c = 0; c < 4; ++c) dequant_e4m3(token + 128 * c, 128, scales[c], out + 128 * c);
  uint16_t rope[64];  // copied: a token may start at any byte, the bf16 loads want 2-byte alignment
  memcpy(rope, token + 528, sizeof(rope));
  bf16_to_f32_row(rope, 64, out + 512);
}

float ue8m0_scale(uint8_t e) {
  const uint32_t bits = e == 0xFF ? 0x7FC00000u : e == 0 ? 0x00400000u : uint32_t(e) << 23;
  float s;
  memcpy(&s, &bits, 4);
  return s;
}

void mla_dequant_model1(const uint8_t* data, const uint8_t* scales, void* row) {
  float* out = static_cast<float*>(row);
  for (int c = 0; c < 7; ++c) dequant_e4m3(data + 64 * c, 64, ue8m0_scale(scales[c]), out + 64 * c);
  uint16_t rope[64];
  memcpy(rope, data + 448, sizeof(rope));
  bf16_to_f32_row(rope, 64, out + 448);
}

// Any n: whole vectors, then the tail through a vector-sized buffer.
void mla_widen_row(const uint16_t* src, int n, bool fp16, void* row) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<hwy::float16_t, decltype(d)> dh;
  const int lanes = int(hn::Lanes(d));
  float* dst = static_cast<float*>(row);
  const int whole = n - n % lanes;
  if (fp16) {
    for (int i = 0; i < whole; i += lanes)
      hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + i))), d, dst + i);
  } else {
    bf16_to_f32_row(src, whole, dst);
  }
  if (whole == n) return;
  HWY_ALIGN uint16_t in[hn::MaxLanes(hn::ScalableTag<float>())] = {};
  HWY_ALIGN float out[hn::MaxLanes(hn::ScalableTag<float>())];
  memcpy(in, src + whole, size_t(n - whole) * 2);
  if (fp16) {
    hn::Store(hn::PromoteTo(d, hn::Load(dh, reinterpret_cast<const hwy::float16_t*>(in))), d, out);
  } else {
    bf16_to_f32_row(in, lanes, out);
  }
  memcpy(dst + whole, out, size_t(n - whole) * 4);
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
