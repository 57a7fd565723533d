// On CPUs other than AArch64 the ARM level folders (neon/, neon_bf16/) are not built. The registry still names its
// accessors; here each says "not built" (nullptr), which the registry treats like any level that is
// absent (isa_includes() already keeps it from asking for an ARM level on such a CPU).
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/mla_bwd_kernel_set.h"
#include "backends/cpu/mla_kernel_set.h"
#include "backends/cpu/mqa_logits_kernels.h"

namespace tessera::cpu {

const GemmKernelSet* gemm_kernels_neon() {
  return nullptr;
}

const GemmKernelSet* gemm_kernels_neon_bf16() {
  return nullptr;
}

GemvFn gemv_kernel_neon_bf16() {
  return nullptr;
}

GemvFp4Fn gemv_fp4_kernel_neon_bf16() {
  return nullptr;
}

const MlaBwdTileOps* mla_bwd_ops_neon() {
  return nullptr;
}

const MlaKernelSet* mla_kernels_neon_bf16() {
  return nullptr;
}

const MqaLogitsKernels* mqa_kernels_neon_bf16() {
  return nullptr;
}

}  // namespace tessera::cpu
