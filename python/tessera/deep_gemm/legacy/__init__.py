"""DeepGEMM's ``deep_gemm.legacy``: the bf16 grouped GEMMs DeepGEMM ships as Triton kernels (``*_tl``).

Same names, arguments and results, computed on the CPU with float32 accumulation:

- ``m_grouped_bf16_gemm_{nt,nn}_contiguous_tl(a, b, d, m_indices)``: d[m] = a[m] @ b[m_indices[m]]^T
  (nn: b is [G, K, N]); rows whose index is -1 are written as zeros.
- ``a_fused_m_grouped_bf16_gemm_{nt,nn}_contiguous_tl(a, b, d, (m_indices, m_row_indices))``: the same
  with a's rows gathered, d[m] = a[m_row_indices[m]] @ ... (a negative row index reads zeros).
- ``{a,b}_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a, b, d, (k_indices, k_start, k_end), acc)``:
  for every group g, d[g] (+)= sum over k in [k_start[g], k_end[g]) of a_row(k)^T b_row(k), where the
  fused operand's row is k_indices[k] (skipped when negative) and the other operand's row is k itself.
  An empty group leaves d[g] with acc, and zeroes it without.
"""
from ._grouped_tl import (
    a_fused_k_grouped_bf16_gemm_tn_contiguous_tl,
    a_fused_m_grouped_bf16_gemm_nn_contiguous_tl,
    a_fused_m_grouped_bf16_gemm_nt_contiguous_tl,
    b_fused_k_grouped_bf16_gemm_tn_contiguous_tl,
    m_grouped_bf16_gemm_nn_contiguous_tl,
    m_grouped_bf16_gemm_nt_contiguous_tl,
)

__all__ = [
    "a_fused_k_grouped_bf16_gemm_tn_contiguous_tl",
    "a_fused_m_grouped_bf16_gemm_nn_contiguous_tl",
    "a_fused_m_grouped_bf16_gemm_nt_contiguous_tl",
    "b_fused_k_grouped_bf16_gemm_tn_contiguous_tl",
    "m_grouped_bf16_gemm_nn_contiguous_tl",
    "m_grouped_bf16_gemm_nt_contiguous_tl",
]
