"""Scale-factor layout utility of the K-grouped GEMMs (DeepGEMM's API, docs/gemm.md) and the group sizes of a
K-grouped layout.

K-grouped operands are [sum K, MN]; their per-channel scale factors (recipe (1, 1, gran_k)) hold
ceil(k_g / gran_k) rows per group, groups one after another: float32 [sum_g ceil(k_g/gran_k), MN].
The packed form keeps every group's exponents in its own int32 rows (packing never crosses a group
boundary): int32 [sum_g ceil(k_g / (4 gran_k)), MN], row-major (MN contiguous), byte j of a row =
SF row 4i+j of that group, byte 0 where the group has fewer rows.
"""
import numbers

import numpy as np

from ..._arrays import like, to_numpy, to_ref
from ..._errors import ArgumentTypeError, InvalidArgumentError
from .math import align, ceil_div

__all__ = ["get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"]


def _int_arg(fn: str, arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be an int, got {type(value).__name__}")
    return int(value)


def k_group_sizes(fn: str, grouped_layout, ks_cpu, k_alignment: int, use_psum_layout: bool) -> list:
    """The K size of every group of a K-grouped layout.

    Without psum, ``grouped_layout`` (int32 [G]) holds the sizes, each a multiple of ``k_alignment``,
    and ``ks_cpu`` (required, DeepGEMM's host copy) must hold the same values. With psum it holds the
    exclusive end of each group, non-decreasing; group g starts at align(end[g-1], k_alignment) and
    has end[g] - start rows (an empty group repeats the previous end or names the aligned start; an end
    inside the alignment gap is an error, as in the M-grouped psum layout). With psum the layout is the
    truth and ``ks_cpu`` only bounds it: None or [] (not synchronised), or per-group upper bounds
    (>= each group's K, e.g. the sizes aligned to k_alignment)."""
    ref = to_ref(grouped_layout, fn, "grouped_layout")
    if ref.dtype != "int32" or len(ref.shape) != 1 or (ref.shape[0] > 1 and ref.strides[0] != 1):
        raise InvalidArgumentError(f"{fn}: argument 'grouped_layout' must be a contiguous 1-D int32 array, got "
                                   f"{ref.dtype} shape {list(ref.shape)} strides {list(ref.strides)}")
    values = [int(v) for v in to_numpy(grouped_layout)]
    groups = len(values)
    host = None
    if use_psum_layout and ks_cpu is not None and len(ks_cpu) == 0:
        ks_cpu = None  # DeepGEMM's "sizes not synchronised to the host"
    if ks_cpu is not None:
        host = [_int_arg(fn, "ks_cpu", k) for k in ks_cpu]
        if len(host) != groups:
            raise InvalidArgumentError(f"{fn}: argument 'ks_cpu' must have one entry per group ({groups}), "
                                       f"got {len(host)}")
    if not use_psum_layout:
        if host is None:
            raise InvalidArgumentError(f"{fn}: argument 'ks_cpu' is required without the psum layout")
        for g, (k, k_host) in enumerate(zip(values, host)):
            if k != k_host:
                raise InvalidArgumentError(f"{fn}: 'grouped_layout' and 'ks_cpu' must hold the same K sizes, "
                                           f"group {g} has {k} vs {k_host}")
            if k < 0 or k % k_alignment:
                raise InvalidArgumentError(f"{fn}: argument 'grouped_layout' must hold K sizes >= 0 that are "
                                           f"multiples of the K alignment {k_alignment}, got {k} for group {g}")
        return values
    sizes, previous_end = [], 0
    for g, end in enumerate(values):
        start = align(previous_end, k_alignment)
        if end < previous_end:
            raise InvalidArgumentError(f"{fn}: argument 'grouped_layout' (psum layout) must be non-decreasing, got "
                                       f"{end} at group {g} after {previous_end}")
        if previous_end < end < start:
            raise InvalidArgumentError(f"{fn}: argument 'grouped_layout' (psum layout) entry {g} = {end} falls inside "
                                       f"the alignment gap [{previous_end}, {start}) after the previous group")
        size = 0 if end == previous_end else end - start
        if host is not None and host[g] < size:
            raise InvalidArgumentError(f"{fn}: argument 'ks_cpu' entry {g} = {host[g]} is below the psum "
                                       f"layout's K of group {g} = {size} (ks_cpu may only bound it from above)")
        sizes.append(size)
        previous_end = end
    return sizes


def get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, grouped_layout, ks_cpu, gran_k: int,
                                                           k_alignment: int, use_psum_layout: bool = False):
    """float32 SF [sum_g ceil(k_g/gran_k), MN] (powers of two, contiguous) of a K-grouped operand ->
    int32 [sum_g ceil(k_g/(4 gran_k)), MN] of packed UE8M0 exponents, four per int32 within one group
    (little-endian: byte j = the group's SF row 4i+j; byte 0 pads a group's last int32). Group sizes
    come from ``grouped_layout``/``ks_cpu`` as in the K-grouped GEMMs (see k_group_sizes). With the
    psum layout ``ks_cpu`` may be None, [] or upper bounds; the result always has the exact rows of
    the layout's real sizes (DeepGEMM may allocate up to its bounds, with the same leading rows)."""
    fn = "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"
    gran_k = _int_arg(fn, "gran_k", gran_k)
    k_alignment = _int_arg(fn, "k_alignment", k_alignment)
    if gran_k <= 0 or k_alignment <= 0:
        raise InvalidArgumentError(f"{fn}: 'gran_k' and 'k_alignment' must be positive, got {gran_k} and "
                                   f"{k_alignment}")
    ref = to_ref(sf, fn, "sf")
    if ref.dtype != "float32" or len(ref.shape) != 2:
        raise InvalidArgumentError(f"{fn}: argument 'sf' must be a 2-D float32 array [sum SF rows, MN], got "
                                   f"{ref.dtype} shape {list(ref.shape)}")
    sizes = k_group_sizes(fn, grouped_layout, ks_cpu, k_alignment, bool(use_psum_layout))
    rows = [ceil_div(k, gran_k) for k in sizes]
    values = np.ascontiguousarray(to_numpy(sf))
    if values.shape[0] != sum(rows):
        raise InvalidArgumentError(f"{fn}: argument 'sf' must have sum_g ceil(k_g/gran_k) = {sum(rows)} rows for "
                                   f"K sizes {sizes} and gran_k {gran_k}, got {values.shape[0]}")
    bits = values.view(np.uint32)
    if np.any(bits & 0x807FFFFF):
        raise InvalidArgumentError(f"{fn}: argument 'sf' must hold non-negative powers of two (UE8M0 scales)")
    mn = values.shape[1]
    out_rows = sum(ceil_div(r, 4) for r in rows)  # exact: the layout is host memory here
    out = np.zeros((out_rows, mn), dtype=np.int32)
    out_bytes = out.view(np.uint8).reshape(out.shape[0], mn, 4)
    first_in, first_out = 0, 0
    for r in rows:
        exponents = (bits[first_in:first_in + r] >> 23).astype(np.uint8)
        for j in range(r):
            out_bytes[first_out + j // 4, :, j % 4] = exponents[j]
        first_in += r
        first_out += ceil_div(r, 4)
    return like(out, sf)
