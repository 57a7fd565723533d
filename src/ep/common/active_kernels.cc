#include "ep/common/active_kernels.h"

#include "backends/cpu/registry.h"

namespace tessera::ep::detail {

const cpu::EpKernels& kernels() {
  return *static_cast<const cpu::EpKernels*>(cpu::cached_kernel(cpu::Slot::kEp, "ep"));
}

}  // namespace tessera::ep::detail
