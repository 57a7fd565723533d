// The Highway top-k kernel set for the avx2 and avx512 levels: the streaming filters and compaction
// (select_filter-inl.h) and the bf16 path's kernels (select_bf16-inl.h), bitwise identical to the
// scalar set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/select_kernels.cc"
#include "backends/cpu/select_kernels.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backends/cpu/hwy/select_bf16-inl.h"
#include "backends/cpu/hwy/select_filter-inl.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON  // the levels' targets (levels.h)
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace {

const SelectKernelTable kSelectKernels = {
    select_filter, select_compact, {bf16_sample, bf16_collect, bf16_window_keys, bf16_count2, bf16_emit}};

const SelectKernelTable* select_kernel_table() {
  return &kSelectKernels;
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"

namespace tessera::cpu {
const SelectKernelTable* select_kernels_hwy(Isa level) {
  TESSERA_HWY_SELECT(level, select_kernel_table);
}
}  // namespace tessera::cpu
#endif
