"""``tessera.deep_gemm``: DeepGEMM's GEMM API on the CPU (``from tessera import deep_gemm``).

Names, argument names, defaults, aliases and the in-place convention follow DeepGEMM v2 (its
``deep_gemm/__init__.py``; docs/gemm.md and docs/compat.md here): GEMMs write into the caller's ``d`` and return None; arrays are
numpy arrays (ml_dtypes for bfloat16/float8) or torch CPU tensors. tessera takes the SM100
personality (both float32 and packed-UE8M0 scale factors, any operand major-ness). Knobs that only
tune GPU kernels are kept as inert, validated settings (see ``_runtime``).

The MoE GEMMs (M-grouped contiguous / psum / masked, K-grouped), einsum, fp8_einsum, the
hyper-connection prenorm GEMM and fp8_gemm_nt_skip_head_mid live in ``_grouped`` and ``_einsum``; the
FP4 quantisers and the K-grouped scale-factor packer in ``utils``. The contiguous layouts' alignment
is ``set_mk_alignment_for_contiguous_layout`` (default 128); the CPU kernels need none
(``get_theoretical_mk_alignment_for_contiguous_layout()`` is 1).

The MQA logits of the sparse-attention indexer (fp8_fp4_mqa_logits, fp8_fp4_paged_mqa_logits, their
legacy fp8_* names and get_paged_mqa_logits_metadata) live in ``_mqa``.

Mega MoE (SymmBuffer, get_symm_buffer_for_mega_moe, transform_weights_for_mega_moe, fp8_fp4_mega_moe,
bf16_mega_moe: the fused expert-parallel MoE layer across the ranks of one host) lives in ``_mega``.

``legacy`` holds DeepGEMM's Triton-era grouped GEMMs (``*_tl``), ``testing`` its test helpers and
``utils.dist`` its process-group helpers.
"""
from . import legacy, testing, utils
from ._gemm import (
    bf16_gemm_nn,
    bf16_gemm_nt,
    bf16_gemm_tn,
    bf16_gemm_tt,
    cublaslt_gemm_nn,
    cublaslt_gemm_nt,
    cublaslt_gemm_tn,
    cublaslt_gemm_tt,
    fp8_fp4_gemm_nn,
    fp8_fp4_gemm_nt,
    fp8_fp4_gemm_tn,
    fp8_fp4_gemm_tt,
    fp8_gemm_nn,
    fp8_gemm_nt,
    fp8_gemm_tn,
    fp8_gemm_tt,
    gemm_fp8_fp8_bf16_nt,
)
from ._einsum import einsum, fp8_einsum, fp8_gemm_nt_skip_head_mid, tf32_hc_prenorm_gemm
from ._grouped import (
    bf16_m_grouped_gemm_nt_masked,
    fp8_m_grouped_gemm_nt_masked,
    k_grouped_bf16_gemm_tn_contiguous,
    k_grouped_fp8_gemm_nt_contiguous,
    k_grouped_fp8_gemm_tn_contiguous,
    m_grouped_bf16_gemm_nn_contiguous,
    m_grouped_bf16_gemm_nt_contiguous,
    m_grouped_bf16_gemm_nt_masked,
    m_grouped_fp8_fp4_gemm_nn_contiguous,
    m_grouped_fp8_fp4_gemm_nt_contiguous,
    m_grouped_fp8_fp4_gemm_nt_masked,
    m_grouped_fp8_gemm_nn_contiguous,
    m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
    m_grouped_gemm_fp8_fp8_bf16_nt_contiguous,
    m_grouped_gemm_fp8_fp8_bf16_nt_masked,
)
from ._mega import (
    SymmBuffer,
    bf16_mega_moe,
    fp8_fp4_mega_moe,
    get_symm_buffer_for_mega_moe,
    transform_weights_for_mega_moe,
)
from ._mqa import (
    fp8_fp4_mqa_logits,
    fp8_fp4_paged_mqa_logits,
    fp8_mqa_logits,
    fp8_paged_mqa_logits,
    get_paged_mqa_logits_metadata,
)
from ._runtime import (
    get_num_sms,
    get_pdl,
    get_tc_util,
    set_block_size_multiple_of,
    set_ignore_compile_dims,
    set_num_sms,
    set_pdl,
    set_tc_util,
)
from .utils import *  # noqa: F401,F403 - DeepGEMM exports its utils at the top level too

__all__ = [
    "legacy", "testing", "utils",
    "bf16_gemm_nt", "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt",
    "fp8_fp4_gemm_nt", "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt",
    "fp8_gemm_nt", "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt",
    "cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt",
    "gemm_fp8_fp8_bf16_nt",
    "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nn_contiguous",
    "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous",
    "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous",
    "m_grouped_fp8_fp4_gemm_nt_masked", "m_grouped_fp8_gemm_nt_masked", "fp8_m_grouped_gemm_nt_masked",
    "m_grouped_bf16_gemm_nt_masked", "bf16_m_grouped_gemm_nt_masked",
    "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous", "m_grouped_gemm_fp8_fp8_bf16_nt_masked",
    "k_grouped_fp8_gemm_tn_contiguous", "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_bf16_gemm_tn_contiguous",
    "einsum", "fp8_einsum", "tf32_hc_prenorm_gemm", "fp8_gemm_nt_skip_head_mid",
    "set_num_sms", "get_num_sms", "set_tc_util", "get_tc_util", "set_pdl", "get_pdl",
    "set_ignore_compile_dims", "set_block_size_multiple_of",
    "fp8_fp4_mqa_logits", "fp8_mqa_logits", "get_paged_mqa_logits_metadata", "fp8_fp4_paged_mqa_logits",
    "fp8_paged_mqa_logits",
    "SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe", "fp8_fp4_mega_moe",
    "bf16_mega_moe",
] + utils.__all__
