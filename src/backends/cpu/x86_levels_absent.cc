// On CPUs other than x86 the x86 level folders (avx2/, avx512/, avx512bf16/, amx/) are not built. The
// registry, the peak loops and the tests still name their accessors; here each says "not built"
// (nullptr), which the registry treats like any level that is absent. isa_includes() already keeps the
// registry from asking for an x86 level on such a CPU; these only satisfy the linker.
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/mla_bwd_kernel_set.h"
#include "backends/cpu/mla_kernel_set.h"
#include "backends/cpu/mqa_logits_kernels.h"
#include "backends/cpu/peak_kernels.h"
#include "backends/cpu/select_kernels.h"
#include "backends/cpu/tl_gemv.h"

namespace tessera::cpu {

// clang-format off
FinalizeFn gemm_finalize_avx512() { return nullptr; }
const GemmKernelSet* gemm_kernels_amx() { return nullptr; }
const GemmKernelSet* gemm_kernels_avx512bf16() { return nullptr; }
const GemmKernelSet* gemm_kernels_avx512() { return nullptr; }
const GemmKernelSet* gemm_kernels_avx2() { return nullptr; }
GemvFn gemv_kernel_avx512bf16() { return nullptr; }
GemvFn gemv_kernel_amx() { return nullptr; }
GemvFp4Fn gemv_fp4_kernel_avx512bf16() { return nullptr; }
GemvFp4Fn gemv_fp4_kernel_amx() { return nullptr; }
const MlaBwdTileOps* mla_bwd_ops_avx2() { return nullptr; }
const MlaBwdTileOps* mla_bwd_ops_avx512() { return nullptr; }
const MlaKernelSet* mla_kernels_avx512bf16() { return nullptr; }
const MlaKernelSet* mla_kernels_amx() { return nullptr; }
const MqaLogitsKernels* mqa_kernels_avx512bf16() { return nullptr; }
const MqaLogitsKernels* mqa_kernels_amx() { return nullptr; }
ComputePeakFn peak_bf16_dot_avx512bf16() { return nullptr; }
ComputePeakFn peak_bf16_amx() { return nullptr; }
ComputePeakFn peak_f32_fma_avx512() { return nullptr; }
ComputePeakFn peak_f32_fma_avx2() { return nullptr; }
const StreamKernels* stream_kernels_avx512() { return nullptr; }
const StreamKernels* stream_kernels_avx2() { return nullptr; }
const SelectKernelTable* select_kernels_avx512() { return nullptr; }
TlGemvFn tl_gemv_avx512bf16() { return nullptr; }
// clang-format on

}  // namespace tessera::cpu
