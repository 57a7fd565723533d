"""``tessera.deep_gemm``: DeepGEMM's dense API on the CPU (``from tessera import deep_gemm``).

Names, argument names, defaults, aliases and the in-place convention follow DeepGEMM v2 (see
/work/shared/specs/deep_gemm.md): GEMMs write into the caller's ``d`` and return None; arrays are
numpy arrays (ml_dtypes for bfloat16/float8) or torch CPU tensors. tessera takes the SM100
personality (both float32 and packed-UE8M0 scale factors, any operand major-ness). Knobs that only
tune GPU kernels are kept as inert, validated settings (see ``_runtime``).

Not provided by this module yet (accessing them raises AttributeError): the M- and K-grouped GEMMs,
einsum, the hyper-connection prenorm GEMM, MQA logits, Mega MoE and the FP4 quantisers.
"""
from . import testing, utils
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
    "testing", "utils",
    "bf16_gemm_nt", "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt",
    "fp8_fp4_gemm_nt", "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt",
    "fp8_gemm_nt", "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt",
    "cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt",
    "gemm_fp8_fp8_bf16_nt",
    "set_num_sms", "get_num_sms", "set_tc_util", "get_tc_util", "set_pdl", "get_pdl",
    "set_ignore_compile_dims", "set_block_size_multiple_of",
] + utils.__all__
