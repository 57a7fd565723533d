// Plain interface of the kernels written once with Google Highway (src/backends/cpu/hwy/), compiled there
// for each x86 vector level (levels.h says which). No inline functions or templates: ISA files include
// this. Each slot's accessor takes the level and returns nullptr when no target of that level was built.
#pragma once

#include "tessera/core/cpu.h"

namespace tessera::cpu {

// The Highway target a level's portable kernels run ("AVX2", "AVX3"), or nullptr.
const char* hwy_target_name(Isa isa);

}  // namespace tessera::cpu
