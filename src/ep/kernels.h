// The ep kernel set for this CPU (src/backends/cpu/ep_kernels.h): AVX-512 when the active ISA has it,
// else the portable one. Both give the same bits.
#pragma once

#include "backends/cpu/ep_kernels.h"

namespace tessera::ep::detail {

const cpu::EpKernels& kernels();

// Copies at least this many bytes with streaming stores when the destination will not be read soon.
constexpr size_t kStreamingMinBytes = 256 << 10;

}  // namespace tessera::ep::detail
