"""MoE GEMMs with DeepGEMM's names, argument names, defaults and aliases (DeepGEMM's API, docs/gemm.md).

M-grouped: the experts share N and K, A's rows are split into groups, D is bfloat16.
  contiguous: A [M_sum, K], B [G, N, K] ('nt') or [G, K, N] ('nn'), D [M_sum, N]. ``grouped_layout``
    (int32) is either the group of every row ([M_sum], -1 = padding row, D row written as zeros;
    each group's segment starts at a multiple of the mk alignment) or, with ``use_psum_layout``, the
    exclusive end row of every group ([G]; group i starts at align(end[i-1], mk alignment)). Gap rows
    of a psum layout are zeros in D with ``ensure_zero_padding`` and untouched without it.
  masked: A [G, max_m, K], B [G, N, K], D [G, max_m, N]; D[g, :masked_m[g]] = A[g, :masked_m[g]] B[g]^T
    and rows from masked_m[g] on are left untouched (DeepGEMM leaves them unspecified).
K-grouped (weight gradients): D[g] = C[g] + A[K_g]^T B[K_g] in float32, A [sum K, M], B [sum K, N];
  ``grouped_layout`` holds the K size of every group (equal to ``ks_cpu``) or, with ``use_psum_layout``,
  exclusive ends (group g starts at align(end[g-1], k alignment)). Empty groups give D[g] = C[g].

The alignment is tessera's contiguous-layout setting (set_mk_alignment_for_contiguous_layout); the
CPU kernels themselves need none. ``compiled_dims``, ``expected_m`` and ``expected_m_for_psum_layout``
are hints: validated, no effect. Scaled operands are (data, scale factors) pairs as in the dense
FP8/FP4 GEMMs (float32 or packed UE8M0 int32 scales, FP8 or packed FP4 data, ``recipe`` or
``recipe_a``/``recipe_b``). Validation happens in C++ before ``d`` is touched; failures raise
``tessera.InvalidArgumentError`` (a ValueError and a RuntimeError) naming the argument and the rule.
"""
import numbers

import numpy as np

from .. import _C
from .._arrays import optional_ref, to_ref
from .._errors import ArgumentTypeError, InvalidArgumentError
from ._gemm import _check_compiled_dims, _pair, _recipe
from ._runtime import get_mk_alignment_for_contiguous_layout
from .utils.grouped_layout import k_group_sizes


def _check_bool(fn: str, arg: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a bool, got {type(value).__name__}")
    return bool(value)


def _check_int(fn: str, arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be an int, got {type(value).__name__}")
    return int(value)


def _check_expected_m_for_psum(fn: str, value, use_psum_layout: bool) -> None:
    if value is None:
        return
    if not use_psum_layout:
        raise InvalidArgumentError(f"{fn}: argument 'expected_m_for_psum_layout' is only meaningful with "
                                   "use_psum_layout=True")
    if _check_int(fn, "expected_m_for_psum_layout", value) < 0:
        raise InvalidArgumentError(f"{fn}: argument 'expected_m_for_psum_layout' must be >= 0, got {value}")


def _ks(fn: str, ks_cpu) -> list:
    """DeepGEMM's ks_cpu (a list of ints, or None) as the native layer's list (empty = none)."""
    if ks_cpu is None:
        return []
    if isinstance(ks_cpu, (str, bytes)) or not hasattr(ks_cpu, "__iter__"):
        raise ArgumentTypeError(f"{fn}: argument 'ks_cpu' must be a list of ints or None, got {type(ks_cpu).__name__}")
    return [_check_int(fn, "ks_cpu", k) for k in ks_cpu]


def _scaled_refs(fn: str, a, b):
    a_data, a_sf = _pair(fn, "a", a)
    b_data, b_sf = _pair(fn, "b", b)
    return (to_ref(a_data, fn, "a"), to_ref(a_sf, fn, "a.scale"), to_ref(b_data, fn, "b"),
            to_ref(b_sf, fn, "b.scale"))


def _recipes(fn: str, recipe, recipe_a, recipe_b):
    return _recipe(fn, "recipe", recipe, 3), _recipe(fn, "recipe_a", recipe_a, 2), _recipe(fn, "recipe_b", recipe_b, 2)


# ---- M-grouped, contiguous layout ----

def _m_grouped_bf16(name: str, a, b, d, grouped_layout, compiled_dims, use_psum_layout, ensure_zero_padding):
    _check_compiled_dims(name, compiled_dims)
    getattr(_C, name)(to_ref(a, name, "a"), to_ref(b, name, "b"), to_ref(d, name, "d", writable=True),
                      to_ref(grouped_layout, name, "grouped_layout"),
                      _check_bool(name, "use_psum_layout", use_psum_layout),
                      _check_bool(name, "ensure_zero_padding", ensure_zero_padding),
                      get_mk_alignment_for_contiguous_layout())


def _m_grouped_scaled(name: str, a, b, d, grouped_layout, recipe, recipe_a, recipe_b, compiled_dims,
                      disable_ue8m0_cast, use_psum_layout, ensure_zero_padding):
    _check_compiled_dims(name, compiled_dims)
    getattr(_C, name)(*_scaled_refs(name, a, b), to_ref(d, name, "d", writable=True),
                      to_ref(grouped_layout, name, "grouped_layout"), *_recipes(name, recipe, recipe_a, recipe_b),
                      _check_bool(name, "disable_ue8m0_cast", disable_ue8m0_cast),
                      _check_bool(name, "use_psum_layout", use_psum_layout),
                      _check_bool(name, "ensure_zero_padding", ensure_zero_padding),
                      get_mk_alignment_for_contiguous_layout())


def m_grouped_bf16_gemm_nt_contiguous(a, b, d, grouped_layout, compiled_dims="nk", use_psum_layout=False,
                                      ensure_zero_padding=True, expected_m_for_psum_layout=None) -> None:
    """BF16 M-grouped GEMM, contiguous layout: d[r] = a[r] @ b[g(r)]^T with a [M_sum, K], b [G, N, K]
    (bfloat16), d [M_sum, N] bfloat16 (see the module docstring for grouped_layout). Returns None."""
    fn = "m_grouped_bf16_gemm_nt_contiguous"
    _check_expected_m_for_psum(fn, expected_m_for_psum_layout, use_psum_layout)
    _m_grouped_bf16(fn, a, b, d, grouped_layout, compiled_dims, use_psum_layout, ensure_zero_padding)


def m_grouped_bf16_gemm_nn_contiguous(a, b, d, grouped_layout, compiled_dims="nk", use_psum_layout=False,
                                      ensure_zero_padding=True) -> None:
    """BF16 M-grouped GEMM, contiguous layout, B given as [G, K, N]: d[r] = a[r] @ b[g(r)]. Returns None."""
    _m_grouped_bf16("m_grouped_bf16_gemm_nn_contiguous", a, b, d, grouped_layout, compiled_dims, use_psum_layout,
                    ensure_zero_padding)


def m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, grouped_layout, recipe=None, recipe_a=None, recipe_b=None,
                                         compiled_dims="nk", disable_ue8m0_cast=False, use_psum_layout=False,
                                         ensure_zero_padding=True, expected_m_for_psum_layout=None) -> None:
    """FP8/FP4 M-grouped GEMM, contiguous layout: a = (data [M_sum, K], sfa [M_sum, sf_k] per token),
    b = (data [G, N, K], sfb [G, ceil(N/gn), sf_k] float32 or [G, N, ceil(sf_k/4)] packed int32),
    d [M_sum, N] bfloat16. Returns None."""
    fn = "m_grouped_fp8_fp4_gemm_nt_contiguous"
    _check_expected_m_for_psum(fn, expected_m_for_psum_layout, use_psum_layout)
    _m_grouped_scaled(fn, a, b, d, grouped_layout, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast,
                      use_psum_layout, ensure_zero_padding)


def m_grouped_fp8_fp4_gemm_nn_contiguous(a, b, d, grouped_layout, recipe=None, recipe_a=None, recipe_b=None,
                                         compiled_dims="nk", disable_ue8m0_cast=False, use_psum_layout=False,
                                         ensure_zero_padding=True) -> None:
    """FP8/FP4 M-grouped GEMM, contiguous layout, B given as [G, K, N] (its scale factors transposed
    along with it). Returns None."""
    _m_grouped_scaled("m_grouped_fp8_fp4_gemm_nn_contiguous", a, b, d, grouped_layout, recipe, recipe_a, recipe_b,
                      compiled_dims, disable_ue8m0_cast, use_psum_layout, ensure_zero_padding)


# ---- M-grouped, masked layout ----

def m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m, compiled_dims="nk") -> None:
    """BF16 M-grouped GEMM, masked layout: a [G, max_m, K], b [G, N, K], d [G, max_m, N] bfloat16,
    masked_m int32 [G]; expected_m (> 0) is a hint. Rows from masked_m[g] on are untouched. Returns None."""
    fn = "m_grouped_bf16_gemm_nt_masked"
    _check_compiled_dims(fn, compiled_dims)
    _C.m_grouped_bf16_gemm_nt_masked(to_ref(a, fn, "a"), to_ref(b, fn, "b"), to_ref(d, fn, "d", writable=True),
                                     to_ref(masked_m, fn, "masked_m"), _check_int(fn, "expected_m", expected_m))


def m_grouped_fp8_fp4_gemm_nt_masked(a, b, d, masked_m, expected_m, recipe=None, recipe_a=None, recipe_b=None,
                                     compiled_dims="nk", disable_ue8m0_cast=False) -> None:
    """FP8/FP4 M-grouped GEMM, masked layout: a = (data [G, max_m, K], sfa [G, max_m, sf_k]),
    b = (data [G, N, K], sfb), d [G, max_m, N] bfloat16, masked_m int32 [G]. Returns None."""
    fn = "m_grouped_fp8_fp4_gemm_nt_masked"
    _check_compiled_dims(fn, compiled_dims)
    _C.m_grouped_fp8_fp4_gemm_nt_masked(*_scaled_refs(fn, a, b), to_ref(d, fn, "d", writable=True),
                                        to_ref(masked_m, fn, "masked_m"), _check_int(fn, "expected_m", expected_m),
                                        *_recipes(fn, recipe, recipe_a, recipe_b),
                                        _check_bool(fn, "disable_ue8m0_cast", disable_ue8m0_cast))


# ---- K-grouped ----

def _k_gran(fn: str, recipe) -> int:
    r = _recipe(fn, "recipe", recipe, 3)
    if r is None or r[0] != 1 or r[1] != 1:
        raise InvalidArgumentError(f"{fn}: argument 'recipe' must be (1, 1, gran_k) (per-channel scale factors), "
                                   f"got {recipe!r}")
    return r[2]


def k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks_cpu, grouped_layout, c=None, compiled_dims="mn",
                                      use_psum_layout=False) -> None:
    """BF16 K-grouped GEMM: d[g] = c[g] + a[K_g]^T @ b[K_g] with a [sum K, M], b [sum K, N] (bfloat16),
    d and c [G, M, N] float32 (c may be d or None). Returns None."""
    fn = "k_grouped_bf16_gemm_tn_contiguous"
    _check_compiled_dims(fn, compiled_dims)
    _C.k_grouped_bf16_gemm_tn_contiguous(to_ref(a, fn, "a"), to_ref(b, fn, "b"), to_ref(d, fn, "d", writable=True),
                                         optional_ref(c, fn, "c"), to_ref(grouped_layout, fn, "grouped_layout"),
                                         _ks(fn, ks_cpu), _check_bool(fn, "use_psum_layout", use_psum_layout),
                                         get_mk_alignment_for_contiguous_layout())


def k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks_cpu, grouped_layout, c=None, recipe=(1, 1, 128),
                                     compiled_dims="mn", use_psum_layout=False) -> None:
    """FP8 K-grouped GEMM: a = (e4m3 [sum K, M], sfa), b = (e4m3 [sum K, N], sfb) with per-channel
    scale factors (recipe (1, 1, gran_k)): float32 [sum_g ceil(k_g/gran_k), MN] or packed int32
    [sum_g ceil(k_g/(4 gran_k)), MN]; d and c [G, M, N] float32. Returns None."""
    fn = "k_grouped_fp8_gemm_tn_contiguous"
    _check_compiled_dims(fn, compiled_dims)
    gran_k = _k_gran(fn, recipe)
    _C.k_grouped_fp8_gemm_tn_contiguous(*_scaled_refs(fn, a, b), to_ref(d, fn, "d", writable=True),
                                        optional_ref(c, fn, "c"), to_ref(grouped_layout, fn, "grouped_layout"),
                                        _ks(fn, ks_cpu), _check_bool(fn, "use_psum_layout", use_psum_layout),
                                        get_mk_alignment_for_contiguous_layout(), gran_k)


def k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks_cpu, grouped_layout, c=None, recipe=(1, 1, 128),
                                     compiled_dims="mn", use_psum_layout=False) -> None:
    """FP8 K-grouped GEMM in DeepGEMM's SM90 form: per group a K-major block [M, k_g] (and [N, k_g]),
    the blocks stored one after another in flat e4m3 arrays; sfa [M, sum_g ceil(k_g/128)] and sfb
    [N, ...] float32. ks_cpu is required and grouped_layout must hold the same sizes; no psum layout;
    recipe (1, 1, 128) only. d [G, M, N] float32, c like d, d itself or None. Returns None."""
    fn = "k_grouped_fp8_gemm_nt_contiguous"
    _check_compiled_dims(fn, compiled_dims)
    if _k_gran(fn, recipe) != 128:
        raise InvalidArgumentError(f"{fn}: argument 'recipe' must be (1, 1, 128) in this form, got {recipe!r}")
    if _check_bool(fn, "use_psum_layout", use_psum_layout):
        raise InvalidArgumentError(f"{fn}: argument 'use_psum_layout' must be False (this form has no psum layout)")
    ks = _ks(fn, ks_cpu)
    k_group_sizes(fn, grouped_layout, ks_cpu, 1, False)
    _C.k_grouped_fp8_gemm_nt_contiguous(*_scaled_refs(fn, a, b), to_ref(d, fn, "d", writable=True),
                                        optional_ref(c, fn, "c"), ks)


# ---- aliases and DeepGEMM v1 names ----

m_grouped_fp8_gemm_nt_contiguous = m_grouped_fp8_fp4_gemm_nt_contiguous
m_grouped_fp8_gemm_nn_contiguous = m_grouped_fp8_fp4_gemm_nn_contiguous
m_grouped_fp8_gemm_nt_masked = m_grouped_fp8_fp4_gemm_nt_masked
fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_fp4_gemm_nt_masked
bf16_m_grouped_gemm_nt_masked = m_grouped_bf16_gemm_nt_masked


def m_grouped_gemm_fp8_fp8_bf16_nt_contiguous(lhs, rhs, out, m_indices) -> None:
    """DeepGEMM v1's name: m_grouped_fp8_gemm_nt_contiguous(lhs, rhs, out, m_indices) with the
    (1, 128, 128) recipe (per-token lhs scales, per-block rhs scales [G, ceil(N/128), ceil(K/128)])."""
    m_grouped_fp8_fp4_gemm_nt_contiguous(lhs, rhs, out, m_indices, recipe=(1, 128, 128))


def m_grouped_gemm_fp8_fp8_bf16_nt_masked(lhs, rhs, out, masked_m, expected_m) -> None:
    """DeepGEMM v1's name: m_grouped_fp8_gemm_nt_masked(lhs, rhs, out, masked_m, expected_m) with the
    (1, 128, 128) recipe."""
    m_grouped_fp8_fp4_gemm_nt_masked(lhs, rhs, out, masked_m, expected_m, recipe=(1, 128, 128))
