"""``tessera.tile_kernels.transpose``: TileKernels' transpose and batched_transpose (any sizes here;
TileKernels asks for multiples of 64)."""
import numpy as np

from .. import _arrays as A
from .. import _kernels_transpose as K

__all__ = ["batched_transpose", "transpose"]

_DTYPES = ("bfloat16", "float32", "float8_e4m3fn", "int8", "uint8", "int32", "int64", "float64")
# kernel dtype (bytes travel as uint8, bf16 as int16: bits, never rounded, NaN payloads kept) and the
# on-chip buffer's dtype
_KERNEL = {"bfloat16": ("int16", "int32"), "float32": ("float32", "float32"), "float8_e4m3fn": ("uint8", "int32"),
           "int8": ("uint8", "int32"), "uint8": ("uint8", "int32"), "int32": ("int32", "int32"),
           "int64": ("int64", "int64"), "float64": ("float64", "float64")}


def batched_transpose(x):
    """out [B, N, M] with out[b] = x[b].T for x [B, M, N] (any row stride, contiguous last dimension)."""
    fn = "batched_transpose"
    A.require_array(fn, "x", x, _DTYPES, ndim=3)
    b, m, n = x.shape
    out = A.alloc(x, (b, n, m), A.dtype_name(x))
    if b and m and n:
        dtype, buffer = _KERNEL[A.dtype_name(x)]
        as_kernel = (lambda a: A.view_as(a, dtype)) if dtype in ("uint8", "int16") else (lambda a: a)
        pack = 4 // np.dtype(dtype).itemsize
        if pack > 1 and m % pack == 0:  # out's rows hold whole int32 words
            K.batched_transpose_packed(dtype, pack).call_all([as_kernel(x), A.view_as(out, "int32")])
        else:
            rows_first = m * np.dtype(dtype).itemsize <= K.ROWS_FIRST_MAX_OUT_ROW_BYTES
            K.batched_transpose(dtype, buffer, rows_first).call_all([as_kernel(x), as_kernel(out)])
    return out


def transpose(x):
    """x.T of a 2-D x as a new contiguous array."""
    A.require_array("transpose", "x", x, _DTYPES, ndim=2)
    return batched_transpose(x[None])[0]
