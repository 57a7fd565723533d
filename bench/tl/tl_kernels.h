// The tile-language kernels `tessera bench tl` measures, written with the C++ builder API (the same IR
// the Python frontend builds; examples/tl/*.py holds the Python versions of the same kernels).
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::bench {

// C[M, N] = A[M, K] . B[N, K]^T, float32 accumulation; M, N, K dynamic. Operands and C are bf16
// unless given (the fp16 / e5m2 rows).
tl::Program tl_gemm_nt_program(int block_m, int block_n, int block_k, int stages,
                               tl::DataType operands = tl::DataType::kBFloat16,
                               tl::DataType out = tl::DataType::kBFloat16);
// C = relu(A + B), bf16 [M, N], M and N dynamic.
tl::Program tl_add_relu_program(int block_m, int block_n);
// y[N] (float32) = (W (float8_e4m3 [N, K]) * scale[N, K / 128]) . x (bf16 [K]); N dynamic.
tl::Program tl_gemv_fp8_program(int k, int block_n);
// The same GEMV over weights stored tile by tile: W[N / block_n, K / 128, block_n, 128] and
// scale[N / block_n, K / 128, block_n], y[N / block_n, block_n]; NB = N / block_n dynamic.
tl::Program tl_gemv_fp8_tiled_program(int k, int block_n, int stages = 2);
// FlashAttention forward, bf16 Q, K, V, O [batch, seq, heads, dim] (the examples/tl layout).
tl::Program tl_flash_attention_program(int batch, int heads, int seq, int dim, int block_m, int block_n, bool causal);

}  // namespace tessera::bench
