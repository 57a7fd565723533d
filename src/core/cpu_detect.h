// Internal to src/core: the per-architecture half of CPU detection (cpu_x86.cc or cpu_arm.cc, one of
// them is built), used by cpu.cc.
#pragma once

#include "tessera/core/cpu.h"

namespace tessera::detail {

// Fills the instruction-set bits, vendor and model name of `f` and sets f->best.
void detect_isa_features(CpuFeatures* f);

// This build's family and its levels, scalar first.
IsaFamily build_isa_family();
const Isa* build_isa_levels(int* count);

}  // namespace tessera::detail
