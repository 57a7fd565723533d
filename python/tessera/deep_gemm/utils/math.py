"""DeepGEMM's math utilities and FP8 quantisers (DeepGEMM's API, docs/gemm.md).

Quantisation of one block: amax = max|x| clamped below at 1e-4; sf = amax / 448; with ``use_ue8m0``
sf becomes the next power of two (ceil_to_ue8m0); q = e4m3(x * (1 / sf)), all in float32, the cast
rounding to nearest even (tessera/core/dtype.h, bit-identical to torch and ml_dtypes). Dequantised
value: q * sf. Inputs may be numpy arrays (any float dtype incl. ml_dtypes bfloat16) or torch CPU
tensors; results are the same kind of array as the input (numpy: ml_dtypes float8_e4m3fn).
"""
import numbers

import ml_dtypes
import numpy as np

from ... import _C
from ..._arrays import like, to_numpy
from ..._errors import InvalidArgumentError, out_of_memory

__all__ = [
    "ceil_div",
    "align",
    "ceil_to_ue8m0",
    "pack_ue8m0_to_int",
    "unpack_ue8m0_from_int",
    "per_token_cast_to_fp8",
    "per_channel_cast_to_fp8",
    "per_block_cast_to_fp8",
    "per_custom_dims_cast_to_fp8",
]

_E4M3_MAX = np.float32(448.0)
_AMAX_FLOOR = np.float32(1e-4)


def ceil_div(x: int, y: int) -> int:
    return (x + y - 1) // y


def align(x: int, y: int) -> int:
    return ceil_div(x, y) * y


def _as_f32(x, fn: str = "", arg: str = "x") -> np.ndarray:
    v = to_numpy(x, fn, arg)
    try:
        return np.asarray(v, dtype=np.float32)
    except MemoryError:
        raise out_of_memory(fn or "tessera.deep_gemm.utils", f"a float32 copy of '{arg}'", v.shape, 4) from None


def _ue8m0_ceil(sf: np.ndarray) -> np.ndarray:
    exponents = _C.cast_from_f32(np.ascontiguousarray(sf, dtype=np.float32), "float8_e8m0fnu_ceil")
    return (exponents.astype(np.int32) << 23).view(np.float32)


def ceil_to_ue8m0(x):
    """|x| rounded up to a power of two, exponent clamped to [1, 254] (float32)."""
    return like(_ue8m0_ceil(_as_f32(x, "ceil_to_ue8m0")), x)


def pack_ue8m0_to_int(x):
    """float32 powers of two [..., 4j] -> int32 [..., j], four exponent bytes per int (little-endian)."""
    fn = "pack_ue8m0_to_int"
    v = to_numpy(x, fn, "x")
    if v.dtype != np.float32 or v.ndim == 0 or v.shape[-1] % 4:
        raise InvalidArgumentError(f"{fn}: argument 'x' must be float32 with a last dimension divisible by 4, "
                                   f"got {v.dtype} shape {list(v.shape)}")
    bits = np.ascontiguousarray(v).view(np.int32)
    if np.any(bits & 0x7FFFFF):
        raise InvalidArgumentError(f"{fn}: argument 'x' must hold powers of two (zero mantissa bits)")
    return like((bits >> 23).astype(np.uint8).view(np.int32), x)


def unpack_ue8m0_from_int(packed_sf):
    """int32 [..., j] of packed exponent bytes -> float32 [..., 4j] (byte e -> bits e << 23; 0 -> 0.0)."""
    v = to_numpy(packed_sf, "unpack_ue8m0_from_int", "packed_sf")
    if v.dtype != np.int32 or v.ndim == 0:
        raise InvalidArgumentError("unpack_ue8m0_from_int: argument 'packed_sf' must be an int32 array, got "
                                   f"{v.dtype}")
    exponents = np.ascontiguousarray(v).view(np.uint8)
    return like((exponents.astype(np.int32) << 23).view(np.float32), packed_sf)


def _scales(amax: np.ndarray, use_ue8m0: bool) -> np.ndarray:
    sf = np.maximum(amax, _AMAX_FLOOR) / _E4M3_MAX
    return _ue8m0_ceil(sf) if use_ue8m0 else sf


def _encode_e4m3(values: np.ndarray) -> np.ndarray:
    codes = _C.cast_from_f32(np.ascontiguousarray(values, dtype=np.float32), "float8_e4m3fn")
    return codes.view(ml_dtypes.float8_e4m3fn)


def _check_2d(fn: str, x: np.ndarray) -> None:
    if x.ndim != 2:
        raise InvalidArgumentError(f"{fn}: argument 'x' must be 2-D, got shape {list(x.shape)}")


def _check_gran(fn: str, gran_k) -> int:
    if isinstance(gran_k, bool) or not isinstance(gran_k, numbers.Integral) or gran_k <= 0:
        raise InvalidArgumentError(f"{fn}: argument 'gran_k' must be a positive int, got {gran_k!r}")
    return int(gran_k)


def per_token_cast_to_fp8(x, use_ue8m0: bool, gran_k: int = 128, use_packed_ue8m0: bool = False):
    """x [M, N] -> (e4m3 [M, N], sf float32 [M, ceil(N/gran_k)]), one scale per row and gran_k
    columns (the last block zero-padded). ``use_packed_ue8m0`` returns sf packed with
    pack_ue8m0_to_int (needs ``use_ue8m0`` power-of-two scales and a scale count divisible by 4)."""
    fn = "per_token_cast_to_fp8"
    v = _as_f32(x, fn)
    _check_2d(fn, v)
    gran_k = _check_gran(fn, gran_k)
    m, n = v.shape
    padded = np.zeros((m, align(n, gran_k)), dtype=np.float32)
    padded[:, :n] = v
    blocks = padded.reshape(m, padded.shape[1] // gran_k, gran_k)  # explicit: m may be 0
    sf = _scales(np.abs(blocks).max(axis=2, initial=np.float32(0)), use_ue8m0)
    q = _encode_e4m3(blocks * (np.float32(1) / sf)[:, :, None]).reshape(m, padded.shape[1])[:, :n]
    q = like(np.ascontiguousarray(q), x)
    return q, pack_ue8m0_to_int(like(sf, x)) if use_packed_ue8m0 else like(sf, x)


def per_channel_cast_to_fp8(x, use_ue8m0: bool, gran_k: int = 128):
    """x [M, N] with M % gran_k == 0 -> (e4m3 [M, N], sf float32 [M/gran_k, N]): one scale per column
    and gran_k rows (the weight-gradient operands' (1, 1, gran_k) layout)."""
    fn = "per_channel_cast_to_fp8"
    v = _as_f32(x, fn)
    _check_2d(fn, v)
    gran_k = _check_gran(fn, gran_k)
    m, n = v.shape
    if m % gran_k:
        raise InvalidArgumentError(f"{fn}: argument 'x' must have a row count divisible by gran_k = {gran_k}, "
                                   f"got shape {[m, n]}")
    blocks = v.reshape(-1, gran_k, n)
    sf = _scales(np.abs(blocks).max(axis=1, initial=np.float32(0)), use_ue8m0)
    q = _encode_e4m3(blocks * (np.float32(1) / sf)[:, None, :]).reshape(m, n)
    return like(q, x), like(sf, x)


def per_block_cast_to_fp8(x, use_ue8m0: bool, gran_k: int = 128):
    """x [M, N] -> (e4m3 [M, N], sf float32 [ceil(M/gran_k), ceil(N/gran_k)]): one scale per
    gran_k x gran_k block (edge blocks zero-padded)."""
    fn = "per_block_cast_to_fp8"
    v = _as_f32(x, fn)
    _check_2d(fn, v)
    gran_k = _check_gran(fn, gran_k)
    m, n = v.shape
    padded = np.zeros((align(m, gran_k), align(n, gran_k)), dtype=np.float32)
    padded[:m, :n] = v
    blocks = padded.reshape(padded.shape[0] // gran_k, gran_k, padded.shape[1] // gran_k, gran_k)
    sf = _scales(np.abs(blocks).max(axis=(1, 3), initial=np.float32(0)), use_ue8m0)
    q = _encode_e4m3(blocks * (np.float32(1) / sf)[:, None, :, None]).reshape(padded.shape)[:m, :n]
    return like(np.ascontiguousarray(q), x), like(sf, x)


def per_custom_dims_cast_to_fp8(x, dims, use_ue8m0: bool):
    """One scale per index of the kept ``dims`` (amax over all other dims): returns (e4m3 of x's
    shape, sf with the kept dims only, like torch's squeeze())."""
    fn = "per_custom_dims_cast_to_fp8"
    v = _as_f32(x, fn)
    kept = {int(d) % v.ndim for d in dims} if v.ndim else set()
    if v.ndim == 0 or any(not -v.ndim <= int(d) < v.ndim for d in dims):
        raise InvalidArgumentError(f"{fn}: argument 'dims' must index dimensions of x (shape {list(v.shape)}), "
                                   f"got {tuple(dims)}")
    reduced = tuple(d for d in range(v.ndim) if d not in kept)
    sf = _scales(np.abs(v).max(axis=reduced, keepdims=True, initial=np.float32(0)), use_ue8m0)
    q = _encode_e4m3(v * (np.float32(1) / sf))
    return like(q, x), like(np.ascontiguousarray(np.squeeze(sf)), x)
