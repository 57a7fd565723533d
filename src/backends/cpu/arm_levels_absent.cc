// On CPUs other than AArch64 the ARM level folder (neon/) is not built. The registry still names its
// accessors; here each says "not built" (nullptr), which the registry treats like any level that is
// absent (isa_includes() already keeps it from asking for an ARM level on such a CPU).
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {

const GemmKernelSet* gemm_kernels_neon() {
  return nullptr;
}

}  // namespace tessera::cpu
