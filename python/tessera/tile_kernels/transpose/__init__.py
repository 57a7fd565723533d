"""``tessera.tile_kernels.transpose``: TileKernels' transpose and batched_transpose (any sizes here;
TileKernels asks for multiples of 64)."""
from .. import _arrays as A
from .. import _kernels_transpose as K

__all__ = ["batched_transpose", "transpose"]

_DTYPES = ("bfloat16", "float32", "float8_e4m3fn", "int8", "uint8", "int32", "int64", "float64")
_TL = {"float8_e4m3fn": "float8_e4m3"}


def batched_transpose(x):
    """out [B, N, M] with out[b] = x[b].T for x [B, M, N] (any row stride, contiguous last dimension)."""
    fn = "batched_transpose"
    A.require_array(fn, "x", x, _DTYPES, ndim=3)
    b, m, n = x.shape
    out = A.alloc(x, (b, n, m), A.dtype_name(x))
    if b and m and n:
        K.batched_transpose(_TL.get(A.dtype_name(x), A.dtype_name(x))).call_all([x, out])
    return out


def transpose(x):
    """x.T of a 2-D x as a new contiguous array."""
    A.require_array("transpose", "x", x, _DTYPES, ndim=2)
    return batched_transpose(x[None])[0]
