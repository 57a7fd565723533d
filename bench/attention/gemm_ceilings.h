// The attention rows' GEMM ceilings: the rate tessera's own bf16 GEMM reaches on a row's matrix
// products, measured in the same run as the row it bounds. Each is timed as plain calls of
// tessera::gemm::bf16_gemm_nt (the layout it runs fastest: transposed operands are given transposed;
// bf16 out), the fastest of three short medians, and returned in the row's own unit, so row / ceiling =
// GEMM time / row time. The products alone: none of the row's other work (softmax, dequantisation,
// gathers).
#pragma once

namespace tessera::bench {

// FMHA backward: S = Q K^T, dP = dO V^T (seq x seq), dV = P^T dO, dK = dS^T Q, dQ = dS K (seq x d) for one
// head of `seq` tokens, counted as the rows are: 2.5x the forward's flops (2 seq^2 (d_qk + d_v)).
double fmha_bwd_gemm_ceiling_gflops(int seq, int d_qk, int d_v);

// FlashMLA: S = Q K^T (rows x tokens, depth d_qk) and O = P V (rows x 512, depth tokens) for one group of
// `rows` query rows attending to `tokens` tokens: 2 rows tokens (d_qk + 512) flops.
double mla_gemm_ceiling_gflops(int rows, int tokens, int d_qk);

}  // namespace tessera::bench
