// Exact float8_e4m3fn and float4_e2m1 -> fp32 conversions on Highway vectors, for the kernels in this
// folder (include after foreach_target.h; re-included once per target like Highway's own -inl headers).
// Subnormal codes go through an integer-to-float conversion rather than rescaled fp32 denormals, so
// the results do not depend on the MXCSR denormals-are-zero flag.
#if defined(TESSERA_HWY_FP8_FP4_TO_F32_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_FP8_FP4_TO_F32_INL_H_
#undef TESSERA_HWY_FP8_FP4_TO_F32_INL_H_
#else
#define TESSERA_HWY_FP8_FP4_TO_F32_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// e4m3 codes (one per int32 lane, 0..255) -> their fp32 values; 0x7F / 0xFF give +- 0x7FC00000 (NaN).
template <class DF, class VI>
HWY_INLINE hn::Vec<DF> E4m3CodesToF32(DF df, VI code) {
  const hn::RebindToSigned<DF> di;
  const VI mag = hn::And(code, hn::Set(di, 0x7F));
  const VI sign = hn::ShiftLeft<24>(hn::And(code, hn::Set(di, 0x80)));
  // Normal codes: exponent e - 7 + 127 and the 3 mantissa bits moved to the top of fp32's fields.
  const VI normal = hn::Add(hn::ShiftLeft<20>(mag), hn::Set(di, 120 << 23));
  const hn::Vec<DF> subnormal = hn::Mul(hn::ConvertTo(df, mag), hn::Set(df, 1.0f / 512));  // m * 2^-9
  hn::Vec<DF> v = hn::IfThenElse(hn::RebindMask(df, hn::Lt(mag, hn::Set(di, 8))), subnormal, hn::BitCast(df, normal));
  const hn::Vec<DF> quiet_nan = hn::BitCast(df, hn::Set(di, 0x7FC00000));  // the scalar conversion's NaN
  v = hn::IfThenElse(hn::RebindMask(df, hn::Eq(mag, hn::Set(di, 0x7F))), quiet_nan, v);
  return hn::Or(v, hn::BitCast(df, sign));
}

// Lanes(df) e4m3 bytes at src -> fp32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadE4m3AsF32(DF df, const uint8_t* src) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> du8;
  return E4m3CodesToF32(df, hn::PromoteTo(di, hn::LoadU(du8, src)));
}

// e2m1 codes (one per int32 lane, 0..15) -> their fp32 values.
template <class DF, class VI>
HWY_INLINE hn::Vec<DF> E2m1CodesToF32(DF df, VI code) {
  const hn::RebindToSigned<DF> di;
#if HWY_TARGET == HWY_NEON
  // Four lanes cannot hold the eight magnitudes: codes 2..7 are 2^(e-1) * (1 + m/2), whose fp32 bits
  // are the code shifted into place plus an exponent bias of 126; codes 0 and 1 are 0 and 0.5.
  const VI mag_code = hn::And(code, hn::Set(di, 7));
  const hn::Vec<DF> big = hn::BitCast(df, hn::Add(hn::ShiftLeft<22>(mag_code), hn::Set(di, 126 << 23)));
  const hn::Vec<DF> small = hn::Mul(hn::ConvertTo(df, mag_code), hn::Set(df, 0.5f));
  const hn::Vec<DF> mag = hn::IfThenElse(hn::RebindMask(df, hn::Lt(mag_code, hn::Set(di, 2))), small, big);
#else
  // Magnitudes of codes 0..7, repeated to fill a 512-bit vector (lookups only use indices < 8).
  alignas(64) static constexpr float kMagnitude[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                                       0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const hn::Vec<DF> mag =
      hn::TableLookupLanes(hn::Load(df, kMagnitude), hn::IndicesFromVec(df, hn::And(code, hn::Set(di, 7))));
#endif
  return hn::Or(mag, hn::BitCast(df, hn::ShiftLeft<28>(hn::And(code, hn::Set(di, 8)))));
}

// 2 * Lanes(df) packed e2m1 values (Lanes(df) bytes at src, low nibble first) -> two fp32 vectors.
template <class DF>
HWY_INLINE void LoadE2m1PairAsF32(DF df, const uint8_t* src, hn::Vec<DF>* first, hn::Vec<DF>* second) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::Vec<decltype(di)> bytes = hn::PromoteTo(di, hn::LoadU(du8, src));
  const hn::Vec<decltype(di)> iota = hn::Iota(di, 0);
  // Lane i of the first vector is nibble i % 2 of byte i / 2; the second vector continues at byte N / 2.
  const hn::Vec<decltype(di)> byte_of_lane = hn::ShiftRight<1>(iota);
  const hn::Vec<decltype(di)> shift = hn::ShiftLeft<2>(hn::And(iota, hn::Set(di, 1)));
  const hn::Vec<decltype(di)> half = hn::Set(di, int32_t(hn::Lanes(df) / 2));
  const hn::Vec<decltype(di)> lo = hn::TableLookupLanes(bytes, hn::IndicesFromVec(di, byte_of_lane));
  const hn::Vec<decltype(di)> hi = hn::TableLookupLanes(bytes, hn::IndicesFromVec(di, hn::Add(byte_of_lane, half)));
  *first = E2m1CodesToF32(df, hn::And(hn::Shr(lo, shift), hn::Set(di, 0xF)));
  *second = E2m1CodesToF32(df, hn::And(hn::Shr(hi, shift), hn::Set(di, 0xF)));
}

}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
