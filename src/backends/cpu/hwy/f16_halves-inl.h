// Widening one half of a vector of binary16 lanes to fp32, for the kernels that convert fp8 codes
// through binary16 (gemv.cc, tl_gemv.cc). Highway 1.0.3's NEON target has no LowerHalf/UpperHalf for
// float16 lanes, so the halves are taken on the same bits as uint16 lanes (a bit cast costs nothing
// on any target).
#if defined(TESSERA_HWY_F16_HALVES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_F16_HALVES_INL_H_
#undef TESSERA_HWY_F16_HALVES_INL_H_
#else
#define TESSERA_HWY_F16_HALVES_INL_H_
#endif

#include <hwy/highway.h>

// Only the targets of tessera levels (levels.h); the scalar baseline has no vector halves.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

// The fp32 values of the lower (kUpper = false) or upper half of the binary16 lanes of `v` (tag DF16).
template <bool kUpper, class DF16, class V>
HWY_INLINE auto promote_f16_half(DF16 df16, V v) {
  const hn::Half<DF16> dh;
  const hn::RebindToUnsigned<DF16> du;
  const hn::Half<decltype(du)> duh;
  const auto bits = hn::BitCast(du, v);
  const auto half = kUpper ? hn::UpperHalf(duh, bits) : hn::LowerHalf(duh, bits);
  return hn::PromoteTo(hn::Repartition<float, DF16>(), hn::BitCast(dh, half));
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET

#endif  // include guard
