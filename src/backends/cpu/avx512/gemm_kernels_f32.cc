// TODO(in progress): fp32-FMA kernel set for avx512.
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
const GemmKernelSet* gemm_kernels_avx512() { return nullptr; }
}  // namespace tessera::cpu
