// The Highway target each tessera level's portable kernels run (for `tessera info --kernels` and
// TESSERA_VERBOSE_DISPATCH); also the smallest example of this folder's pattern.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/targets.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {

const char* target_name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"
#include "backends/cpu/hwy_kernels.h"

namespace tessera::cpu {
const char* hwy_target_name(Isa isa) { TESSERA_HWY_SELECT(isa, target_name); }
}  // namespace tessera::cpu
#endif
