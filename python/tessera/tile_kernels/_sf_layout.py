"""Scaling-factor (SF) tensors of TileKernels' casts: their three layouts, allocation and the trace-time
helpers that load and store one factor inside a tile-language kernel.

A cast with SF block (bt, bc) has one factor per bt x bc block of the data: a logical [m, k] matrix,
m = ceil(tokens / bt), k = ceil(hidden / bc). It is stored as
- ``row``:   float32 [m, k], row-major (any row stride);
- ``col``:   float32 [m, k] seen through its transpose, a [k, align(m, 4)] row-major storage (TMA-aligned
             column-major, ``use_tma_aligned_col_major_sf``);
- ``ue8m0``: the exponent byte of a power-of-two factor, four consecutive k packed in one int32: an int32
             [m, ceil(k / 4)] column-major view of a uint8 [ceil(k / 4), 4 * align(m, 4)] storage where
             byte (k // 4, 4 * m + k % 4) holds factor (m, k) (``use_packed_ue8m0``; little-endian).
Kernels always address the storage (the [k, ...] array for col / ue8m0) and Python builds the views.
"""
from .. import language as T
from . import _arrays as A


def align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def layout_of(use_tma_aligned_col_major_sf: bool, use_packed_ue8m0: bool) -> str:
    return "ue8m0" if use_packed_ue8m0 else ("col" if use_tma_aligned_col_major_sf else "row")


def storage_dtype(layout: str) -> str:
    return "uint8" if layout == "ue8m0" else "float32"


def alloc_sf(like, m: int, k: int, layout: str):
    """(storage for the kernel, the view returned to the caller); padding bytes are zero."""
    if layout == "row":
        sf = A.alloc(like, (m, k), "float32")
        return sf, sf
    if layout == "col":
        storage = A.alloc(like, (k, align(m, 4)), "float32", zero=True)
        return storage, A.transpose(storage[:, :m])
    storage = A.alloc(like, (ceil_div(k, 4), 4 * align(m, 4)), "uint8", zero=True)
    return storage, A.transpose(A.view_as(storage, "int32")[:, :m])


def sf_storage_of(fn: str, arg: str, sf, m: int, k: int):
    """(layout, storage) of a caller's SF tensor given in one of the three layouts (as TileKernels tells
    them apart: stride(0) == 1 means column-major; int32 means packed UE8M0)."""
    A.require_array(fn, arg, sf, ("float32", "int32"), ndim=2, last_contiguous=False)
    packed = A.dtype_name(sf) == "int32"
    want = (m, ceil_div(k, 4)) if packed else (m, k)
    if tuple(sf.shape) != want:
        raise A.invalid_argument(fn, arg, f"must have shape {list(want)}, got {list(sf.shape)}")
    column_major = A.stride(sf, 0) == 1 and A.stride(sf, 1) != 1
    if packed:
        if not column_major and m > 1 and sf.shape[1] > 1:
            raise A.invalid_argument(fn, arg, "packed UE8M0 (int32) factors must be column-major")
        return "ue8m0", A.view_as(A.transpose(sf), "uint8")
    if column_major:
        return "col", A.transpose(sf)
    if A.stride(sf, 1) != 1:
        raise A.invalid_argument(fn, arg, "must be row-major or column-major")
    return "row", sf


def sf_param_shape(layout: str, m_dim, k: int, cols_dim):
    """Shape of the storage parameter: m_dim / cols_dim are T.dynamic symbols (rows of the logical SF
    matrix, columns of a transposed storage)."""
    if layout == "row":
        return (m_dim, k)
    if layout == "col":
        return (k, cols_dim)
    return (ceil_div(k, 4), cols_dim)


def load_sf(storage, layout: str, mi, ki):
    """The float32 factor (mi, ki) of an SF storage (trace time)."""
    if layout == "row":
        return storage[mi, ki]
    if layout == "col":
        return storage[ki, mi]
    byte = T.cast(storage[ki // 4, mi * 4 + ki % 4], "int32")
    return T.reinterpret(byte * 8388608, "float32")


def store_sf(storage, layout: str, mi, ki, sf, exponent_byte):
    if layout == "row":
        storage[mi, ki] = sf
    elif layout == "col":
        storage[ki, mi] = sf
    else:
        storage[ki // 4, mi * 4 + ki % 4] = T.cast(exponent_byte, "uint8")
