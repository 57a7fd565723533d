// T.gemm on the CPU: C (+)= A . B^T over one block's tiles, on the same packed micro-kernels as the GEMM
// library (src/backends/cpu/gemm_kernel_set.h). Operand pairs the kernel sets take (bfloat16 / float8
// e4m3 with vdpbf16ps; float32 mixes with the fp32 FMA sets) run there; other dtypes (float16, e5m2)
// run a scalar loop. K is summed in order within each K chunk, so results never depend on threads.
#pragma once

#include "tessera/tl/runtime/abi.h"

namespace tessera::tl {

void tile_gemm(const TlGemmArgs& g);

}  // namespace tessera::tl
