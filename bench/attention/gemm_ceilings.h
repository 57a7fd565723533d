// The attention rows' GEMM ceilings: the rate a bf16 GEMM reaches on a row's matrix products, measured
// in the same run as the row it bounds. The products are timed as plain calls of
// tessera::gemm::bf16_gemm_nt (the layout it runs fastest: transposed operands are given transposed;
// bf16 out), and again through the peer's matmul (oneDNN, bf16 out; below AVX-512 its fp32 fallback
// converts the operands per call, timed with it): the ceiling the strongest peer library sets on the
// same products. Each is the fastest of three short medians, in the row's own unit, so row / ceiling =
// GEMM time / row time. The products alone: none of the row's other work (softmax, dequantisation,
// gathers).
#pragma once

namespace tessera::bench {

struct GemmCeilings {
  double tessera_gflops;  // tessera's bf16 GEMM
  double onednn_gflops;   // oneDNN's matmul; NaN when the build has no oneDNN or it refuses a product
};

// FMHA backward: S = Q K^T, dP = dO V^T (seq x seq), dV = P^T dO, dK = dS^T Q, dQ = dS K (seq x d) for one
// head of `seq` tokens, counted as the rows are: 2.5x the forward's flops (2 seq^2 (d_qk + d_v)).
GemmCeilings fmha_bwd_gemm_ceilings(int seq, int d_qk, int d_v);

// FlashMLA: S = Q K^T (rows x tokens, depth d_qk) and O = P V (rows x 512, depth tokens) for one group of
// `rows` query rows attending to `tokens` tokens: 2 rows tokens (d_qk + 512) flops.
GemmCeilings mla_gemm_ceilings(int rows, int tokens, int d_qk);

}  // namespace tessera::bench
