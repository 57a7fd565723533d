#include "ep/kernels.h"

#include "tessera/core/cpu.h"

namespace tessera::ep::detail {

const cpu::EpKernels& kernels() {
  return active_isa() >= Isa::kAvx512 ? *cpu::ep_kernels_avx512() : *cpu::ep_kernels_scalar();
}

}  // namespace tessera::ep::detail
