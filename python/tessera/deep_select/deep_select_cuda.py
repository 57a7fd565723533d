"""tessera's top-k backend, under the name of DeepSelect's compiled backend module.

DeepSelect's ``interface.topk`` validates its arguments, allocates the outputs and hands everything
to ``deep_select.deep_select_cuda.topk`` positionally; code (DeepSelect's own interface tests among
it) swaps that module for a fake. tessera keeps the split and the name, so the same swap works, and
this module is what runs by default - on the CPU, whatever its name says.

``topk(input, topk, begin, end, sorted, sorted_index, output_value, output_index, output_idx_offset,
idx_oob_fill_value, value_oob_fill_value, return_value, abort_when_nan_found)`` writes into the given
outputs and returns None. It checks DeepSelect's memory rules first (RuntimeError, the message naming
the rule): input and output_index start 16-byte aligned, the input's backing storage covers every row's
full stride (the final row padded too), output_index rows do not overlap. ``begin`` is supported here
([begin, end) row ranges, absolute indices) although the public ``topk`` rejects it as DeepSelect does.
"""
import numpy as np

from .. import _C
from .._arrays import is_torch_tensor, optional_ref, to_ref
from .._errors import InvalidArgumentError

_FN = "topk"
_PTR_ALIGN = 16
# numpy 2 moved byte_bounds; the old name is gone there.
_byte_bounds = getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds


def get_alignment_requirement():
    """(input row stride, output row stride) alignments in bytes of DeepSelect's GPU kernels: (1024, 32).
    tessera needs neither; the outputs ``topk`` allocates use the second."""
    return tuple(_C.select_stride_requirement())


def _ptr_size_end(x):
    """(data address, itemsize, end of the memory that backs x) for a torch tensor or a numpy array."""
    if is_torch_tensor(x):
        storage = x.untyped_storage()
        return x.data_ptr(), x.element_size(), storage.data_ptr() + storage.nbytes()
    root = x
    while isinstance(getattr(root, "base", None), np.ndarray):
        root = root.base
    return x.__array_interface__["data"][0], x.itemsize, _byte_bounds(root)[1]


def _rows_strides(x):
    return (tuple(x.shape), tuple(x.stride())) if is_torch_tensor(x) else (
        tuple(x.shape), tuple(s // x.itemsize for s in x.strides))


class TopkMemoryError(InvalidArgumentError):
    """A DeepSelect memory rule (alignment, padding, overlap) is violated."""


def check_memory(input, output_index) -> None:
    """DeepSelect's memory rules for the input and the index output (see the module docstring)."""
    (rows, width), (row_stride, _) = _rows_strides(input)
    if rows and width:
        ptr, item, end = _ptr_size_end(input)
        if ptr % _PTR_ALIGN:
            raise TopkMemoryError(f"{_FN}: input.data_ptr() must be {_PTR_ALIGN}-byte aligned, got offset "
                                  f"{ptr % _PTR_ALIGN} (a view that starts mid-row?)")
        if ptr + rows * row_stride * item > end:
            raise TopkMemoryError(f"{_FN}: input backing storage must cover {rows} full rows of stride "
                                  f"{row_stride} (pad the final row to the row stride, as DeepSelect reads whole "
                                  f"rows); it ends {ptr + rows * row_stride * item - end} bytes short")
    (orows, ocols), (ostride, ocol_stride) = _rows_strides(output_index)
    if orows and ocols:
        ptr, _, _ = _ptr_size_end(output_index)
        if ptr % _PTR_ALIGN:
            raise TopkMemoryError(f"{_FN}: output_index.data_ptr() must be {_PTR_ALIGN}-byte aligned, got offset "
                                  f"{ptr % _PTR_ALIGN}")
        span = (ocols - 1) * abs(ocol_stride) + 1
        if orows > 1 and abs(ostride) < span:
            raise TopkMemoryError(f"{_FN}: output_index rows must not overlap (row stride {ostride} elements, "
                                  f"a row spans {span})")


def topk(input, topk, begin, end, sorted, sorted_index, output_value, output_index, output_idx_offset,
         idx_oob_fill_value, value_oob_fill_value, return_value, abort_when_nan_found) -> None:
    check_memory(input, output_index)
    _C.select_topk(to_ref(input, _FN, "input"), int(topk), optional_ref(begin, _FN, "begin"),
                   optional_ref(end, _FN, "end"),
                   optional_ref(output_value if return_value else None, _FN, "output_value", writable=True),
                   to_ref(output_index, _FN, "output_index", writable=True),
                   optional_ref(output_idx_offset, _FN, "output_idx_offset"), bool(sorted), bool(sorted_index),
                   int(idx_oob_fill_value), float(value_oob_fill_value), bool(abort_when_nan_found))
