"""Dense GEMMs with DeepGEMM's names, argument names, defaults and in-place convention.

Every function computes ``d = c + a @ b`` into the caller's ``d`` and returns None (DeepGEMM's API, docs/gemm.md):
the suffix says how A and B are given (``nt``: A [M, K], B [N, K]; ``nn``: B [K, N]; ``tn``: A [K, M],
B [K, N]; ``tt``: A [K, M], B [N, K]); operands may be K-major or MN-major with free leading strides;
``d`` (and ``c``, which may be ``d`` itself) is row-major bfloat16 or float32. ``compiled_dims`` is a
JIT hint and is ignored. Validation happens in C++ before ``d`` is touched; failures raise
``tessera.InvalidArgumentError`` (a ValueError and a RuntimeError) naming the argument and the rule.
"""
import numbers

import numpy as np

from .. import _C
from .._arrays import optional_ref, to_ref
from .._errors import ArgumentTypeError, InvalidArgumentError


def _check_compiled_dims(fn: str, compiled_dims) -> None:
    if not isinstance(compiled_dims, str):
        raise ArgumentTypeError(f"{fn}: argument 'compiled_dims' must be a str, got {type(compiled_dims).__name__}")


def _plain_gemm(name: str, default_dims: str, doc: str):
    native = getattr(_C, name)

    def gemm(a, b, d, c=None, compiled_dims=default_dims):
        _check_compiled_dims(name, compiled_dims)
        native(to_ref(a, name, "a"), to_ref(b, name, "b"), to_ref(d, name, "d", writable=True),
               optional_ref(c, name, "c"))

    gemm.__name__ = gemm.__qualname__ = name
    gemm.__doc__ = doc
    return gemm


def _cublaslt_gemm(name: str, doc: str):
    native = getattr(_C, name)

    def gemm(a, b, d, c=None):
        native(to_ref(a, name, "a"), to_ref(b, name, "b"), to_ref(d, name, "d", writable=True),
               optional_ref(c, name, "c"))

    gemm.__name__ = gemm.__qualname__ = name
    gemm.__doc__ = doc
    return gemm


def _pair(fn: str, arg: str, value):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a (data, scale_factors) pair, got {type(value).__name__}")
    return value


def _recipe(fn: str, arg: str, value, length: int):
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a tuple of {length} ints, got {value!r}")
    if len(value) != length:
        raise InvalidArgumentError(f"{fn}: argument '{arg}' must have {length} entries, got {len(value)}")
    return tuple(int(v) for v in value)


def _scaled_gemm(name: str, default_dims: str, doc: str):
    native = getattr(_C, name)

    def gemm(a, b, d, c=None, recipe=None, recipe_a=None, recipe_b=None, compiled_dims=default_dims,
             disable_ue8m0_cast=False):
        _check_compiled_dims(name, compiled_dims)
        if not isinstance(disable_ue8m0_cast, (bool, np.bool_)):
            raise ArgumentTypeError(f"{name}: argument 'disable_ue8m0_cast' must be a bool, "
                            f"got {type(disable_ue8m0_cast).__name__}")
        a_data, a_sf = _pair(name, "a", a)
        b_data, b_sf = _pair(name, "b", b)
        native(to_ref(a_data, name, "a"), to_ref(a_sf, name, "a.scale"),
               to_ref(b_data, name, "b"), to_ref(b_sf, name, "b.scale"),
               to_ref(d, name, "d", writable=True), optional_ref(c, name, "c"),
               _recipe(name, "recipe", recipe, 3), _recipe(name, "recipe_a", recipe_a, 2),
               _recipe(name, "recipe_b", recipe_b, 2), bool(disable_ue8m0_cast))

    gemm.__name__ = gemm.__qualname__ = name
    gemm.__doc__ = doc
    return gemm


_BF16_DOC = """BF16 GEMM, layout {layout}: d = c + a @ b with fp32 accumulation and one rounding to d's
dtype. a: {a}, b: {b} (bfloat16); d: [M, N] bfloat16 or float32, row-major; c: None, an array like d,
or d itself. compiled_dims is accepted and ignored. Returns None."""

_FP8_DOC = """FP8/FP4 GEMM with block scale factors, layout {layout}:
d[m, n] = c[m, n] + sum_k (A[m, k] * sfa[m // gm, k // gka]) * (B[n, k] * sfb[n // gn, k // gkb]).
a = (data, sf) with data {a}, b = (data, sf) with data {b}; data is float8_e4m3fn or packed FP4
(int8, two e2m1 per byte along K). Scale factors are float32 [ceil(MN/g_mn), ceil(K/g_k)] (any
strides) or packed UE8M0 int32 [MN, ceil(ceil(K/g_k)/4)], transposed along with their data.
recipe=(gm, gn, gk) or recipe_a=(gm, gka) with recipe_b=(gn, gkb); defaults: float32 sfb (1, 128, 128),
int32 sfb (1, 1, 128), FP4 operands gran_k 32. d: [M, N] bfloat16 or float32; c: None, like d, or d.
compiled_dims and disable_ue8m0_cast are accepted and have no effect on the CPU. Returns None."""

_LT_DOC = """cuBLASLt-style plain GEMM, layout {layout}: d = c + a @ b without scale factors; a: {a},
b: {b}, both bfloat16 or both float8_e4m3fn; d: [M, N] bfloat16 or float32. Returns None."""

_SHAPES = {"nt": ("[M, K]", "[N, K]", "nk"), "nn": ("[M, K]", "[K, N]", "nk"),
           "tn": ("[K, M]", "[K, N]", "mn"), "tt": ("[K, M]", "[N, K]", "mn")}


def _doc(template: str, layout: str) -> str:
    a, b, _ = _SHAPES[layout]
    return template.format(layout=layout, a=a, b=b)


bf16_gemm_nt = _plain_gemm("bf16_gemm_nt", "nk", _doc(_BF16_DOC, "nt"))
bf16_gemm_nn = _plain_gemm("bf16_gemm_nn", "nk", _doc(_BF16_DOC, "nn"))
bf16_gemm_tn = _plain_gemm("bf16_gemm_tn", "mn", _doc(_BF16_DOC, "tn"))
bf16_gemm_tt = _plain_gemm("bf16_gemm_tt", "mn", _doc(_BF16_DOC, "tt"))

fp8_fp4_gemm_nt = _scaled_gemm("fp8_fp4_gemm_nt", "nk", _doc(_FP8_DOC, "nt"))
fp8_fp4_gemm_nn = _scaled_gemm("fp8_fp4_gemm_nn", "nk", _doc(_FP8_DOC, "nn"))
fp8_fp4_gemm_tn = _scaled_gemm("fp8_fp4_gemm_tn", "mn", _doc(_FP8_DOC, "tn"))
fp8_fp4_gemm_tt = _scaled_gemm("fp8_fp4_gemm_tt", "mn", _doc(_FP8_DOC, "tt"))

# DeepGEMM's aliases: FP8 x FP8 is a special case of the FP8/FP4 GEMMs.
fp8_gemm_nt = fp8_fp4_gemm_nt
fp8_gemm_nn = fp8_fp4_gemm_nn
fp8_gemm_tn = fp8_fp4_gemm_tn
fp8_gemm_tt = fp8_fp4_gemm_tt

cublaslt_gemm_nt = _cublaslt_gemm("cublaslt_gemm_nt", _doc(_LT_DOC, "nt"))
cublaslt_gemm_nn = _cublaslt_gemm("cublaslt_gemm_nn", _doc(_LT_DOC, "nn"))
cublaslt_gemm_tn = _cublaslt_gemm("cublaslt_gemm_tn", _doc(_LT_DOC, "tn"))
cublaslt_gemm_tt = _cublaslt_gemm("cublaslt_gemm_tt", _doc(_LT_DOC, "tt"))


def gemm_fp8_fp8_bf16_nt(lhs, rhs, out) -> None:
    """DeepGEMM v1's name: out[M, N] (bfloat16) = lhs @ rhs^T with lhs = (float8_e4m3fn [M, K], float32
    per-token scales [M, ceil(K/128)]) and rhs = (float8_e4m3fn [N, K], float32 per-block scales
    [ceil(N/128), ceil(K/128)]). Same as fp8_gemm_nt(lhs, rhs, out) with the (1, 128, 128) recipe."""
    fn = "gemm_fp8_fp8_bf16_nt"
    out_dtype = to_ref(out, fn, "out", writable=True).dtype
    if out_dtype != "bfloat16":
        raise InvalidArgumentError(f"{fn}: argument 'out' must have dtype bfloat16, got {out_dtype}")
    fp8_fp4_gemm_nt(lhs, rhs, out, recipe=(1, 128, 128))
