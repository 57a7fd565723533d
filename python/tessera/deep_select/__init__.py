"""``tessera.deep_select``: DeepSelect's top-k on the CPU (``from tessera import deep_select``).

``topk`` keeps DeepSelect's signature, defaults and return convention (see
/work/shared/specs/flash_mla.md section 9 and include/tessera/select.h for the full contract):
``(values or None, indices)``, outputs allocated with their row stride padded to
``get_stride_requirement()[1]`` bytes (so they may be non-contiguous views) unless ``output_idx`` is
given. Inputs are numpy arrays (``ml_dtypes.bfloat16`` / ``float32``) or torch CPU tensors; outputs
are the same kind of array.

Choices tessera makes where DeepSelect is silent or backend-specific:

- The selected set is the first ``topk`` elements of a total order: larger value first, ``-0.0`` just
  below ``+0.0``, equal values by lower index. It is therefore unique and identical on every run,
  thread count and instruction set.
- ``sorted=False``: the order is unspecified (tessera happens to return ascending indices);
  ``sorted=True`` orders by that total order and also works for bfloat16 input (DeepSelect's CUDA
  backend allows it for float32 only). ``sorted`` with ``sorted_index``, or ``sorted`` with
  ``return_value=False``, is an error, as in DeepSelect.
- ``begin`` is implemented (DeepSelect documents it but rejects it): the row range is
  ``[begin[i], end[i])``; indices stay absolute column positions. ``hint`` must be None.
- NaN in a row longer than ``topk``: with ``abort_when_nan_found=True`` the rows without NaN are
  written and an ``InvalidArgumentError`` names the first NaN row (DeepSelect traps the kernel);
  otherwise every index of that row becomes ``0x3F3F3F3F`` and every value NaN (DeepSelect's CUDA
  backend sets only index 0). Rows no longer than ``topk`` are never checked.
- Any input row stride is accepted; ``get_stride_requirement()`` returns DeepSelect's GPU values
  (1024, 32) so code that pads to them keeps working.
"""
import numbers

import ml_dtypes
import numpy as np

from .. import _C
from .._arrays import is_torch_tensor, optional_ref, to_ref, torch_module
from .._errors import InvalidArgumentError, NotImplementedInTessera

__all__ = ["topk", "get_stride_requirement"]

_FN = "topk"


def get_stride_requirement():
    """(input row stride, output row stride) alignments in bytes of DeepSelect's GPU kernels: (1024, 32).
    tessera needs neither; outputs it allocates use the second."""
    return tuple(_C.select_stride_requirement())


def _index_dtype_name(indices_type) -> str:
    torch = torch_module()
    if torch is not None and isinstance(indices_type, torch.dtype):
        if indices_type in (torch.int32, torch.int64):
            return "int32" if indices_type == torch.int32 else "int64"
    else:
        try:
            dt = np.dtype(indices_type)
        except TypeError:
            dt = None
        if dt is not None and dt in (np.dtype(np.int32), np.dtype(np.int64)):
            return dt.name
    raise InvalidArgumentError(f"{_FN}: argument 'indices_type' must be int32 or int64, got {indices_type!r}")


def _dtype_name_of(x) -> str:
    if is_torch_tensor(x):
        return str(x.dtype).replace("torch.", "")
    return np.dtype(x.dtype).name


def _empty_padded(rows: int, cols: int, dtype_name: str, like_input):
    """[rows, cols] with the row stride rounded up to the output stride requirement."""
    np_dtype = {"int32": np.int32, "int64": np.int64, "float32": np.float32,
                "bfloat16": ml_dtypes.bfloat16}[dtype_name]
    per_row = max(1, get_stride_requirement()[1] // np.dtype(np_dtype).itemsize)
    padded = (cols + per_row - 1) // per_row * per_row
    if is_torch_tensor(like_input):
        torch = torch_module()
        return torch.empty((rows, padded), dtype=getattr(torch, dtype_name))[:, :cols]
    return np.empty((rows, padded), dtype=np_dtype)[:, :cols]


def _check_int(arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{_FN}: argument '{arg}' must be an int, got {type(value).__name__}")
    return int(value)


def _check_bool(arg: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{_FN}: argument '{arg}' must be a bool, got {type(value).__name__}")
    return bool(value)


def topk(input, topk, sorted=False, begin=None, end=None, indices_type=np.int64, sorted_index=False, hint=None,
         output_idx=None, output_idx_offset=None, idx_oob_fill_value=2147483647,
         value_oob_fill_value=float("-inf"), return_value=True, abort_when_nan_found=True):
    """The ``topk`` largest entries of each row of ``input`` [b, V] (bfloat16 or float32).

    begin / end: optional int32 [b], the row range [begin[i], end[i]) (defaults 0 and V).
    indices_type: int32 or int64 (numpy or torch dtype). output_idx: optional [b, topk] array of that
    dtype to write the indices into. output_idx_offset: optional int32 [b] added to every real index.
    Rows shorter than or equal to topk return their valid entries first, then idx_oob_fill_value /
    value_oob_fill_value (the fill index is not offset). Returns (values or None, indices).
    """
    k = _check_int("topk", topk)
    if hint is not None:
        raise NotImplementedInTessera(f"{_FN}: argument 'hint' is not supported (DeepSelect: not supported either)")
    sorted_ = _check_bool("sorted", sorted)
    sorted_index = _check_bool("sorted_index", sorted_index)
    return_value = _check_bool("return_value", return_value)
    abort = _check_bool("abort_when_nan_found", abort_when_nan_found)
    idx_fill = _check_int("idx_oob_fill_value", idx_oob_fill_value)
    if not isinstance(value_oob_fill_value, numbers.Real):
        raise TypeError(f"{_FN}: argument 'value_oob_fill_value' must be a float, "
                        f"got {type(value_oob_fill_value).__name__}")
    idx_name = _index_dtype_name(indices_type)
    in_ref = to_ref(input, _FN, "input")
    if len(in_ref.shape) != 2:
        raise InvalidArgumentError(f"{_FN}: argument 'input' must be 2-D [b, vocab_size], got shape "
                                   f"{list(in_ref.shape)}")
    in_dtype = _dtype_name_of(input)
    if in_dtype not in ("bfloat16", "float32"):
        raise InvalidArgumentError(f"{_FN}: argument 'input' must have dtype bfloat16 or float32, got {in_dtype}")
    rows = in_ref.shape[0]
    if output_idx is None:
        if not 1 <= k <= _C.select_max_topk:  # before allocating [rows, topk]
            raise InvalidArgumentError(f"{_FN}: argument 'topk' must be in [1, {_C.select_max_topk}], got {k}")
        output_idx = _empty_padded(rows, k, idx_name, input)
    elif _dtype_name_of(output_idx) != idx_name:
        raise InvalidArgumentError(f"{_FN}: argument 'output_idx' must have dtype indices_type ({idx_name}), "
                                   f"got {_dtype_name_of(output_idx)}")
    values = None
    if return_value and 1 <= k <= _C.select_max_topk:
        values = _empty_padded(rows, k, in_dtype, input)
    _C.select_topk(in_ref, k, optional_ref(begin, _FN, "begin"), optional_ref(end, _FN, "end"),
                   optional_ref(values, _FN, "output_val", writable=True),
                   to_ref(output_idx, _FN, "output_idx", writable=True),
                   optional_ref(output_idx_offset, _FN, "output_idx_offset"), sorted_, sorted_index, idx_fill,
                   float(value_oob_fill_value), abort)
    return values, output_idx
