"""DeepGEMM's other GEMMs: einsum, fp8_einsum, the hyper-connection
prenorm GEMM and the FP8 GEMM that skips the middle of every head.

All of them write into the caller's ``d`` and return None; validation happens in C++ before ``d`` is
touched and failures raise ``tessera.InvalidArgumentError`` (a ValueError and a RuntimeError).
"""
import numbers

import numpy as np

from .. import _C
from .._arrays import optional_ref, to_ref
from .._errors import ArgumentTypeError, InvalidArgumentError
from ._fp8_einsum import fp8_einsum_bhd_hdr_bhr, fp8_einsum_bhd_bhr_hdr
from ._gemm import _check_compiled_dims, _pair, _recipe


def _check_expr(fn: str, expr) -> str:
    if not isinstance(expr, str):
        raise ArgumentTypeError(f"{fn}: argument 'expr' must be a str, got {type(expr).__name__}")
    return expr


def einsum(expr, a, b, d, c=None, use_cublaslt=False) -> None:
    """bfloat16 einsum with fp32 accumulation, one of DeepGEMM's expressions:
      'bmk,bnk->mn'  d[m, n] = sum_s a[s] @ b[s]^T; a float32 d needs c to be d (accumulate),
                     a bfloat16 d needs c None
      'bhr,hdr->bhd' d[b, h] = b[h] @ a[b, h]   (no c)
      'bhd,hdr->bhr' d[b, h] = a[b, h] @ b[h]   (no c)
    The last dimension of a, b and d must be contiguous. The two per-head expressions sum each output
    in float32 along one chain over the contracted dimension in order (DeepGEMM's order; the same bits
    on every ISA level and thread count); 'bmk,bnk->mn' sums in float32, batch by batch.
    ``use_cublaslt`` selects a GPU library and has no effect (the result is the same). Returns None."""
    fn = "einsum"
    if not isinstance(use_cublaslt, (bool, np.bool_)):
        raise ArgumentTypeError(f"{fn}: argument 'use_cublaslt' must be a bool, got {type(use_cublaslt).__name__}")
    _C.einsum(_check_expr(fn, expr), to_ref(a, fn, "a"), to_ref(b, fn, "b"), to_ref(d, fn, "d", writable=True),
              optional_ref(c, fn, "c"))


def fp8_einsum(expr, a, b, d, c=None, recipe=(1, 128, 128)) -> None:
    """FP8 einsum with DeepGEMM's expressions; with c, d = c + a.b (c may be d). Returns None.
      'bhr,hdr->bhd': a = (e4m3 x [b, h, r], sf [b, h, ceil(r/128)] per token), b = (e4m3 y [h, d, r],
                      sf [h, ceil(d/128), ceil(r/128)] per block), d [b, h, d] bfloat16 or float32.
      'bhd,hdr->bhr' and 'bhd,bhr->hdr' (DeepGEMM: SM100 only): see _fp8_einsum for their layouts."""
    fn = "fp8_einsum"
    _check_expr(fn, expr)
    a_pair, b_pair = _pair(fn, "a", a), _pair(fn, "b", b)
    rec = _recipe(fn, "recipe", recipe, 3)
    if expr == "bhd,hdr->bhr":
        return fp8_einsum_bhd_hdr_bhr(a_pair, b_pair, d, c, rec)
    if expr == "bhd,bhr->hdr":
        return fp8_einsum_bhd_bhr_hdr(a_pair, b_pair, d, c, rec)
    a_data, a_sf = a_pair
    b_data, b_sf = b_pair
    _C.fp8_einsum(expr, to_ref(a_data, fn, "a"), to_ref(a_sf, fn, "a.scale"),
                  to_ref(b_data, fn, "b"), to_ref(b_sf, fn, "b.scale"), to_ref(d, fn, "d", writable=True),
                  optional_ref(c, fn, "c"), rec)


def tf32_hc_prenorm_gemm(a, b, d, sqr_sum, num_splits=None) -> None:
    """Hyper-connection prenorm GEMM: d = a @ b^T (a [M, K] bfloat16, b [N, K] float32, d float32) and
    sqr_sum[m] = sum_k a[m, k]^2, computed in float32 (at least TF32 precision). K % 64 == 0,
    N % 8 == 0, N <= 128. Without ``num_splits`` d is [M, N] and sqr_sum [M]; with S splits d is
    [S, M, N] and sqr_sum [S, M]: K is cut in 64-wide blocks, split s takes nb/S of them (one more for
    s < nb % S), and the caller sums the splits. Returns None."""
    fn = "tf32_hc_prenorm_gemm"
    splits = 0
    if num_splits is not None:
        if isinstance(num_splits, bool) or not isinstance(num_splits, numbers.Integral):
            raise ArgumentTypeError(f"{fn}: argument 'num_splits' must be an int or None, got {type(num_splits).__name__}")
        if num_splits < 1:
            raise InvalidArgumentError(f"{fn}: argument 'num_splits' must be >= 1 (or None), got {num_splits}")
        splits = int(num_splits)
    _C.tf32_hc_prenorm_gemm(to_ref(a, fn, "a"), to_ref(b, fn, "b"), to_ref(d, fn, "d", writable=True),
                            to_ref(sqr_sum, fn, "sqr_sum", writable=True), splits)


def fp8_gemm_nt_skip_head_mid(a, b, d, head_splits, recipe=None, compiled_dims="nk",
                              disable_ue8m0_cast=False) -> None:
    """FP8 nt GEMM (a = (e4m3 [M, K], sfa), b = (e4m3 [N, K], sfb), as fp8_gemm_nt, no c) whose output
    skips M columns in the middle of every head: head_splits = (L, M, R), N % (L + R) == 0, d is
    bfloat16 [M, N + (N / (L + R)) * M] and logical column n goes to d column
    n + floor((n + R) / (L + R)) * M. The skipped columns are untouched. Returns None."""
    fn = "fp8_gemm_nt_skip_head_mid"
    _check_compiled_dims(fn, compiled_dims)
    if not isinstance(disable_ue8m0_cast, (bool, np.bool_)):
        raise ArgumentTypeError(f"{fn}: argument 'disable_ue8m0_cast' must be a bool, got {type(disable_ue8m0_cast).__name__}")
    splits = _recipe(fn, "head_splits", head_splits, 3)
    if splits is None:
        raise ArgumentTypeError(f"{fn}: argument 'head_splits' must be a tuple of 3 ints (left, mid, right), got None")
    a_data, a_sf = _pair(fn, "a", a)
    b_data, b_sf = _pair(fn, "b", b)
    _C.fp8_gemm_nt_skip_head_mid(to_ref(a_data, fn, "a"), to_ref(a_sf, fn, "a.scale"), to_ref(b_data, fn, "b"),
                                 to_ref(b_sf, fn, "b.scale"), to_ref(d, fn, "d", writable=True), splits,
                                 _recipe(fn, "recipe", recipe, 3), None, None, bool(disable_ue8m0_cast))
