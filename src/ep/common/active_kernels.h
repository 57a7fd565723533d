// The ep kernel set for the active ISA level (src/backends/cpu/ep_kernels.h), as the kernel registry
// (slot kEp) chooses it. Every set gives the same bits.
#pragma once

#include "backends/cpu/ep_kernels.h"

namespace tessera::ep::detail {

const cpu::EpKernels& kernels();

// Copies at least this many bytes with streaming stores when the destination will not be read soon.
constexpr size_t kStreamingMinBytes = 256 << 10;

}  // namespace tessera::ep::detail
