// T.gemm on the CPU: C (+)= A . B^T over one block's tiles, on the same packed micro-kernels as the GEMM
// library (src/backends/cpu/gemm_kernel_set.h). bfloat16 / float8 e4m3 / e5m2 operands run on AMX tiles
// where the level has them, else vdpbf16ps (e5m2 converts to bf16 exactly); float32 mixes on the fp32
// FMA sets. float16 pairs run on AMX as their exact bf16 split (x = hi + lo, gemm_kernel_set.h
// F16Split: four bf16 products per fp16 product, exact, fp32 sums); every other float16 case runs on
// the fp32 FMA sets, which read fp16 exactly. The scalar loop remains for the scalar level. K is summed
// in a fixed order, so results never depend on threads (they do depend on the level).
#pragma once

#include "tessera/tl/runtime/abi.h"

namespace tessera::tl {

void tile_gemm(const TlGemmArgs& g);

}  // namespace tessera::tl
