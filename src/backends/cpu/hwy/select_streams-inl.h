// The read streams of select_streams.inc for the Highway top-k kernels (select_filter-inl.h,
// select_bf16-inl.h), compiled once per target.
#if defined(TESSERA_HWY_SELECT_STREAMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_SELECT_STREAMS_INL_H_
#undef TESSERA_HWY_SELECT_STREAMS_INL_H_
#else
#define TESSERA_HWY_SELECT_STREAMS_INL_H_
#endif

#include <hwy/highway.h>
#include <stdint.h>

#include "backends/cpu/select_kernels.h"

// Built for the AVX2 and AVX3 targets only (levels.h); the baseline target of foreach_target gets none.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace {

#include "backends/cpu/select_streams.inc"

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET

#endif  // include guard
