// The FMHA backward rows' GEMM ceiling: the rate tessera's own bf16 GEMM reaches on the backward's
// five products of one head, measured in the same run as the row it bounds.
#pragma once

namespace tessera::bench {

// S = Q K^T, dP = dO V^T (seq x seq), dV = P^T dO, dK = dS^T Q, dQ = dS K (seq x d) for one head of `seq`
// tokens, as plain calls of tessera::gemm::bf16_gemm_nt (the layout it runs fastest: the transposed
// operands are given transposed; bf16 out), timed together (the fastest of three short medians). Returned
// in the rows' own unit, 2.5x the forward's flops (2 seq^2 (d_qk + d_v)) over that time, so row / ceiling =
// GEMM time / row time.
double fmha_bwd_gemm_ceiling_gflops(int seq, int d_qk, int d_v);

}  // namespace tessera::bench
