// The FlashMLA rows' GEMM ceiling: the rate tessera's own bf16 GEMM reaches on one query group's two
// products, measured in the same run as the row it bounds.
#pragma once

namespace tessera::bench {

// S = Q K^T (rows x tokens, depth d_qk) and O = P V (rows x 512, depth tokens) for one group of `rows`
// query rows attending to `tokens` tokens, as plain calls of tessera::gemm::bf16_gemm_nt (V given
// transposed, its fastest layout; bf16 out), timed together (the fastest of three short medians).
// Returned in the rows' unit, 2 rows tokens (d_qk + 512) flops over that time, so row / ceiling = GEMM
// time / row time. The products alone: no dequantisation, softmax or gather, which the rows also do.
double mla_gemm_ceiling_gflops(int rows, int tokens, int d_qk);

}  // namespace tessera::bench
