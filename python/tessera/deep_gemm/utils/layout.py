"""DeepGEMM's scale-factor layout utilities (DeepGEMM's API, docs/gemm.md) with its exact shapes and strides.

The CPU kernels read scale factors in any layout; these functions still produce the layouts DeepGEMM
produces ("MN-major, TMA-aligned": the MN dimension contiguous, each column padded to a multiple of
16 bytes), so code that inspects or reuses them behaves the same. Results are numpy arrays for numpy
input and torch tensors for torch input.
"""
import numbers

import numpy as np

from ... import _C
from ..._arrays import is_torch_tensor, like, to_numpy, to_ref, torch_module
from ..._errors import ArgumentTypeError, InvalidArgumentError
from .._runtime import (
    get_k_alignment_for_contiguous_layout,
    get_m_alignment_for_contiguous_layout,
    get_mk_alignment_for_contiguous_layout,
    get_theoretical_mk_alignment_for_contiguous_layout,
    set_mk_alignment_for_contiguous_layout,
)
from .math import align, ceil_div

__all__ = [
    "get_tma_aligned_size",
    "get_mn_major_tma_aligned_tensor",
    "get_col_major_tma_aligned_tensor",
    "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "transform_sf_into_required_layout",
    "get_mk_alignment_for_contiguous_layout",
    "set_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout",
    "get_k_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
]


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """``align(x, 16 // element_size)``: elements of a 16-byte aligned column."""
    return int(_C.get_tma_aligned_size(int(x), int(element_size)))


def _check_sf(fn: str, sf, dtype: str = "float32"):
    ref = to_ref(sf, fn, "sf")
    if len(ref.shape) not in (2, 3):
        raise InvalidArgumentError(f"{fn}: argument 'sf' must be 2-D [MN, SFK] or 3-D [G, MN, SFK], got shape "
                                   f"{list(ref.shape)}")
    if ref.dtype != dtype:
        raise InvalidArgumentError(f"{fn}: argument 'sf' must have dtype {dtype}, got {ref.dtype}")
    return ref


def _empty_mn_major(reference, shape, amn: int, dtype: str):
    """Uninitialised array of ``shape`` ((G,) MN, cols) with strides ((amn*cols,) 1, amn) elements,
    the same kind of array as ``reference``."""
    cols = shape[-1]
    strides = (amn * cols, 1, amn)[3 - len(shape):]
    if is_torch_tensor(reference):
        torch = torch_module()
        return torch.empty_strided(shape, strides, dtype=getattr(torch, dtype))
    itemsize = np.dtype(dtype).itemsize
    groups = shape[0] if len(shape) == 3 else 1
    storage = np.empty(max(groups * amn * cols, 1), dtype=dtype)
    return np.lib.stride_tricks.as_strided(storage, shape, tuple(s * itemsize for s in strides))


def _is_contiguous(shape, strides) -> bool:
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _is_mn_major_aligned(shape, strides, amn: int) -> bool:
    if len(shape) == 3 and strides[0] != amn * shape[2]:
        return False
    return strides[-2] == 1 and strides[-1] == amn


def get_mn_major_tma_aligned_tensor(sf):
    """float32 SF [(G,) MN, SFK] -> the same values with strides ((aMN*SFK,) 1, aMN), aMN = align(MN, 4);
    ``sf`` itself when it already has them."""
    fn = "get_mn_major_tma_aligned_tensor"
    ref = _check_sf(fn, sf)
    amn = get_tma_aligned_size(ref.shape[-2], 4)
    if _is_mn_major_aligned(ref.shape, ref.strides, amn):
        return sf
    out = _empty_mn_major(sf, tuple(ref.shape), amn, "float32")
    _C.copy_to_mn_major_tma_aligned(ref, to_ref(out, fn, "dst", writable=True))
    return out


get_col_major_tma_aligned_tensor = get_mn_major_tma_aligned_tensor


def _psum_gap_rows(fn: str, psum_layout, mn: int) -> np.ndarray:
    """Boolean mask of the rows outside every group of a psum layout (entry i = exclusive end row of
    group i; group i starts at align(end of group i-1, mk alignment))."""
    ref = to_ref(psum_layout, fn, "psum_layout")
    if ref.dtype != "int32" or not _is_contiguous(ref.shape, ref.strides) or len(ref.shape) != 1:
        raise InvalidArgumentError(f"{fn}: argument 'psum_layout' must be a contiguous 1-D int32 array, got "
                                   f"{ref.dtype} shape {list(ref.shape)} strides {list(ref.strides)}")
    if ref.shape[0] == 0:
        raise InvalidArgumentError(f"{fn}: argument 'psum_layout' must have at least one group")
    ends = to_numpy(psum_layout).astype(np.int64)
    alignment = get_mk_alignment_for_contiguous_layout()
    gap = np.ones(mn, dtype=bool)
    previous_end = 0
    for g, end in enumerate(ends):
        if end < previous_end or end > mn:
            raise InvalidArgumentError(f"{fn}: argument 'psum_layout' must be non-decreasing and <= MN = {mn}, "
                                       f"got {int(end)} at group {g} after {previous_end}")
        gap[align(previous_end, alignment):end] = False
        previous_end = int(end)
    return gap


def get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout=None):
    """float32 SF [(G,) MN, SFK] holding powers of two -> int32 [(G,) MN, ceil(SFK/4)] of UE8M0
    exponents, four K-consecutive ones per int32 (byte j = SF column 4i+j), MN-major with strides
    ((aMN*P,) 1, aMN). Missing K entries get byte 0. With ``psum_layout`` (2-D contiguous ``sf`` of an
    M-grouped psum layout), rows in the gaps between groups are not read and get 0."""
    fn = "get_mn_major_tma_aligned_packed_ue8m0_tensor"
    ref = _check_sf(fn, sf)
    shape = tuple(ref.shape)
    mn = shape[-2]
    amn = get_tma_aligned_size(mn, 4)
    packed_shape = shape[:-1] + (ceil_div(shape[-1], 4),)
    source, gap = sf, None
    if psum_layout is not None:
        if len(shape) != 2 or not _is_contiguous(shape, ref.strides):
            raise InvalidArgumentError(f"{fn}: with 'psum_layout', argument 'sf' must be 2-D and contiguous, "
                                       f"got shape {list(shape)} strides {list(ref.strides)}")
        gap = _psum_gap_rows(fn, psum_layout, mn)
        source = np.array(to_numpy(sf), dtype=np.float32)
        source[gap] = 1.0  # gap rows may hold garbage; pack a valid placeholder and clear it below
    out = _empty_mn_major(sf, packed_shape, amn, "int32")
    _C.pack_ue8m0_mn_major(to_ref(source, fn, "sf"), to_ref(out, fn, "dst", writable=True))
    if gap is not None:
        out[like(np.flatnonzero(gap), out)] = 0
    return out


def _check_recipe(fn: str, recipe, is_sfa):
    if not isinstance(recipe, (tuple, list)) or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in recipe):
        raise ArgumentTypeError(f"{fn}: argument 'recipe' must be a tuple of 2 or 3 ints, got {recipe!r}")
    if len(recipe) == 3:
        if is_sfa is None:
            raise InvalidArgumentError(f"{fn}: a 3-entry 'recipe' (gran_m, gran_n, gran_k) needs 'is_sfa'")
        return int(recipe[0] if is_sfa else recipe[1]), int(recipe[2])
    if len(recipe) == 2:
        if is_sfa is not None:
            raise InvalidArgumentError(f"{fn}: a 2-entry 'recipe' (gran_mn, gran_k) must not come with 'is_sfa'")
        return int(recipe[0]), int(recipe[1])
    raise InvalidArgumentError(f"{fn}: argument 'recipe' must have 2 or 3 entries, got {len(recipe)}")


def _check_sf_shape(fn: str, ref, mn: int, k: int, gran_mn: int, gran_k: int, num_groups):
    if ref.dtype not in ("float32", "int32"):
        raise InvalidArgumentError(f"{fn}: argument 'sf' must have dtype float32 or int32, got {ref.dtype}")
    per_int = 4 if ref.dtype == "int32" else 1
    want = ([num_groups] if num_groups is not None else []) + [ceil_div(mn, gran_mn), ceil_div(k, gran_k * per_int)]
    if list(ref.shape) != want:
        raise InvalidArgumentError(f"{fn}: argument 'sf' must have shape {want} ({ref.dtype} for MN {mn}, K {k}, "
                                   f"gran_mn {gran_mn}, gran_k {gran_k}), got {list(ref.shape)}")


def _check_tma_strides(fn: str, ref, mn: int):
    shape, strides = ref.shape, ref.strides
    ok = (len(shape) == 2 or strides[-3] == strides[-1] * shape[-1]) and (strides[-2] == 1 or mn == 1)
    ok = ok and strides[-1] >= get_tma_aligned_size(mn, 4) and strides[-1] % 4 == 0
    if not ok:
        raise InvalidArgumentError(f"{fn}: argument 'sf' (packed UE8M0) must be MN-major and TMA-aligned, "
                                   f"got strides {list(strides)} for shape {list(shape)}")


def _check_block_sf_strides(fn: str, ref):
    shape, strides = ref.shape, ref.strides
    ok = len(shape) == 2 or strides[-3] == shape[-2] * shape[-1]
    ok = ok and ((strides[-1] == 1 and strides[-2] == shape[-1]) or (strides[-1] == shape[-2] and strides[-2] == 1))
    if not ok:
        raise InvalidArgumentError(f"{fn}: argument 'sf' (128x128 blocks) must be contiguous, possibly with its "
                                   f"last two dims transposed, got strides {list(strides)} for shape {list(shape)}")


def transform_sf_into_required_layout(sf, mn: int, k: int, recipe, num_groups=None, is_sfa=None,
                                      disable_ue8m0_cast: bool = False, psum_layout=None):
    """Checks an SF tensor's shape for (mn, k, recipe[, num_groups]) and returns the layout DeepGEMM's
    SM100 kernels take (tessera's default personality):
      float32, gran_k 32/128           -> rows broadcast to gran_mn 1, packed UE8M0 int32, MN-major
      float32 (1, 128), disable cast   -> MN-major TMA-aligned float32 (the SM90 per-token layout)
      float32 (128, 128), disable cast -> unchanged after a contiguity check (the SM90 weight layout)
      int32 (1, 32/128)                -> unchanged after a TMA layout check
    ``recipe`` is (gran_m, gran_n, gran_k) with ``is_sfa`` choosing the operand, or (gran_mn, gran_k)."""
    fn = "transform_sf_into_required_layout"
    gran_mn, gran_k = _check_recipe(fn, recipe, is_sfa)
    ref = to_ref(sf, fn, "sf")
    _check_sf_shape(fn, ref, int(mn), int(k), gran_mn, gran_k, num_groups)
    if ref.dtype == "float32" and disable_ue8m0_cast and gran_k == 128 and gran_mn in (1, 128):
        if gran_mn == 1:
            return get_mn_major_tma_aligned_tensor(sf)
        _check_block_sf_strides(fn, ref)
        return sf
    if ref.dtype == "float32" and gran_k in (32, 128) and not disable_ue8m0_cast:
        if gran_mn != 1:
            rows = np.arange(int(mn)) // gran_mn
            sf = sf[..., like(rows, sf), :] if is_torch_tensor(sf) else sf[..., rows, :]
        return get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout)
    if ref.dtype == "int32" and gran_mn == 1 and gran_k in (32, 128):
        _check_tma_strides(fn, ref, int(mn))
        return sf
    raise InvalidArgumentError(f"{fn}: no layout for {ref.dtype} scale factors with gran_mn {gran_mn}, gran_k "
                               f"{gran_k}, disable_ue8m0_cast={bool(disable_ue8m0_cast)}")
