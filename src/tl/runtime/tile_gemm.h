// T.gemm on the CPU: C (+)= A . B^T over one block's tiles, on the same packed micro-kernels as the GEMM
// library (src/backends/cpu/gemm_kernel_set.h). Operand pairs the kernel sets take (bfloat16 / float8
// e4m3 with AMX tiles where the level has them, else vdpbf16ps; float32 mixes with the fp32 FMA sets)
// run there; other dtypes (float16, e5m2) run a scalar loop: Sapphire Rapids' AMX has no fp16 products,
// and rounding fp16 to bf16 would drop 3 mantissa bits that TileLang's fp16 GEMM keeps. K is summed in
// order, so results never depend on threads (they do depend on the level).
#pragma once

#include "tessera/tl/runtime/abi.h"

namespace tessera::tl {

void tile_gemm(const TlGemmArgs& g);

}  // namespace tessera::tl
