"""DeepGEMM's FP4 (e2m1) utilities (DeepGEMM's API, docs/gemm.md): quantise, transpose and dequantise
packed FP4.

Packed FP4 is int8 with two e2m1 codes per byte, element 2i in the low nibble. A code's low three
bits index {0, 0.5, 1, 1.5, 2, 3, 4, 6} and bit 3 is the sign; the quantiser never produces a
negative zero. Quantisation of one 1 x gran_k block: amax = max|x| clamped below at 1e-4,
sf = amax / 6 (optionally rounded up to a power of two, UE8M0), then the code of x * (1 / sf) is the
number of midpoints {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} strictly below its magnitude (ties go to the
smaller magnitude; magnitudes above 6 saturate; NaN encodes as +0, as every e2m1 encoder of the
library does) - DeepGEMM's reference rule, which differs from round-to-nearest-even at 0.75, 1.75 and
5. The encoding is the extension's (``_C.cast_from_f32(..., "float4_e2m1fn_deepgemm")``, the C++
kernels' rule in tessera/core/dtype.h). All arithmetic is float32. Inputs may be numpy arrays
(any float dtype) or torch CPU tensors; results are the same kind of array.
"""
import numpy as np

from ... import _C
from ..._arrays import like, to_numpy
from ..._errors import InvalidArgumentError
from .math import _as_f32, _check_2d, _check_gran, _ue8m0_ceil, align, pack_ue8m0_to_int, unpack_ue8m0_from_int

__all__ = [
    "per_token_cast_to_fp4",
    "transpose_packed_fp4",
    "cast_back_from_fp4",
]

_E2M1_MAX = np.float32(6.0)
_AMAX_FLOOR = np.float32(1e-4)
_E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


def _encode_e2m1(x: np.ndarray) -> np.ndarray:
    """float32 -> uint8 codes 0..15 by DeepGEMM's midpoint rule (the extension's encoder)."""
    return _C.cast_from_f32(np.ascontiguousarray(x, dtype=np.float32), "float4_e2m1fn_deepgemm")


def _decode_e2m1(codes: np.ndarray) -> np.ndarray:
    """uint8 codes 0..15 -> float32 values (code 8, a negative zero, decodes to +0)."""
    values = _E2M1_VALUES[codes & 0x7]
    return np.where((codes & 0x8) != 0, -values, values).astype(np.float32)


def _pack_pairs(codes: np.ndarray) -> np.ndarray:
    """uint8 codes [..., 2j] -> int8 [..., j], element 2i in the low nibble."""
    return ((codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)).astype(np.uint8).view(np.int8)


def _unpack_pairs(packed: np.ndarray) -> np.ndarray:
    """int8 [..., j] -> uint8 codes [..., 2j]."""
    b = np.ascontiguousarray(packed).view(np.uint8)
    codes = np.empty(b.shape[:-1] + (2 * b.shape[-1],), dtype=np.uint8)
    codes[..., 0::2] = b & 0xF
    codes[..., 1::2] = b >> 4
    return codes


def _check_packed(fn: str, arg: str, packed) -> np.ndarray:
    v = to_numpy(packed)
    if v.dtype not in (np.int8, np.uint8) or v.ndim != 2:
        raise InvalidArgumentError(f"{fn}: argument '{arg}' must be a 2-D int8 array of packed FP4, got {v.dtype} "
                                   f"shape {list(v.shape)}")
    return v


def per_token_cast_to_fp4(x, use_ue8m0: bool, gran_k: int = 128, use_packed_ue8m0: bool = False):
    """x [M, N] (N even) -> (packed FP4 int8 [M, N/2], sf float32 [M, ceil(N/gran_k)]): one scale per
    row and gran_k columns (the last block zero-padded). MX-style FP4 uses gran_k = 32 with
    ``use_ue8m0``. ``use_packed_ue8m0`` (needs ``use_ue8m0``) returns sf packed with pack_ue8m0_to_int,
    int32 [M, ceil(ceil(N/gran_k)/4)]: a scale count that is not a multiple of 4 is padded with 1.0."""
    fn = "per_token_cast_to_fp4"
    v = _as_f32(x, fn)
    _check_2d(fn, v)
    gran_k = _check_gran(fn, gran_k)
    m, n = v.shape
    if n % 2:
        raise InvalidArgumentError(f"{fn}: argument 'x' must have an even number of columns (two FP4 values per "
                                   f"byte), got shape {[m, n]}")
    if use_packed_ue8m0 and not use_ue8m0:
        raise InvalidArgumentError(f"{fn}: 'use_packed_ue8m0' needs 'use_ue8m0' (packed scales are powers of two)")
    padded = np.zeros((m, align(n, gran_k)), dtype=np.float32)
    padded[:, :n] = v
    blocks = padded.reshape(m, padded.shape[1] // gran_k, gran_k)  # explicit: m may be 0
    sf = np.maximum(np.abs(blocks).max(axis=2, initial=np.float32(0)), _AMAX_FLOOR) / _E2M1_MAX
    if use_ue8m0:
        sf = _ue8m0_ceil(sf)
    codes = _encode_e2m1(blocks * (np.float32(1) / sf)[:, :, None]).reshape(m, padded.shape[1])
    packed = np.ascontiguousarray(_pack_pairs(codes)[:, :n // 2])
    if use_packed_ue8m0 and sf.shape[-1] % 4:
        # Four exponent bytes per int32: pad the scale count to a multiple of 4 with 1.0 (2^0). The
        # padding covers no element and is never read.
        sf = np.pad(sf, [(0, 0), (0, 4 - sf.shape[-1] % 4)], constant_values=1.0)
    sf = like(sf.astype(np.float32), x)
    return like(packed, x), pack_ue8m0_to_int(sf) if use_packed_ue8m0 else sf


def transpose_packed_fp4(a):
    """Packed FP4 [M, N/2] (M even) -> packed FP4 [N, M/2] holding the transposed values, contiguous.
    ``transpose_packed_fp4(q).T`` is q's matrix stored MN-major (packed along M)."""
    fn = "transpose_packed_fp4"
    v = _check_packed(fn, "a", a)
    m = v.shape[0]
    if m % 2:
        raise InvalidArgumentError(f"{fn}: argument 'a' must have an even number of rows (they become packed "
                                   f"pairs), got shape {list(v.shape)}")
    codes_t = np.ascontiguousarray(_unpack_pairs(v).T)
    return like(np.ascontiguousarray(_pack_pairs(codes_t)).view(v.dtype), a)


def cast_back_from_fp4(packed, sf, gran_k: int = 128, use_packed_ue8m0: bool = False):
    """Dequantises packed FP4 [M, N/2] with sf [M, ceil(N/gran_k)] (float32, or int32 packed UE8M0 with
    ``use_packed_ue8m0``) -> float32 [M, N] = value * sf[m, n // gran_k]."""
    fn = "cast_back_from_fp4"
    v = _check_packed(fn, "packed", packed)
    gran_k = _check_gran(fn, gran_k)
    scales = to_numpy(unpack_ue8m0_from_int(sf) if use_packed_ue8m0 else sf)
    m, n = v.shape[0], 2 * v.shape[1]
    need = -(-n // gran_k)
    if scales.ndim != 2 or scales.shape[0] != m or scales.shape[1] < need:
        raise InvalidArgumentError(f"{fn}: argument 'sf' must have shape [{m}, >= {need}] for packed shape "
                                   f"{list(v.shape)} and gran_k {gran_k}, got {list(scales.shape)}")
    values = _decode_e2m1(_unpack_pairs(v)) * np.asarray(scales, dtype=np.float32)[:, np.arange(n) // gran_k]
    return like(values.astype(np.float32), packed)
