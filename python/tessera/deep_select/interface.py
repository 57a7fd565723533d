"""DeepSelect's ``deep_select.interface``: ``topk`` and ``get_stride_requirement``.

As in DeepSelect, this layer checks the arguments, allocates the outputs and calls the backend module
``deep_select_cuda`` of its own package (tessera's CPU backend unless a caller swapped it), so nothing
is allocated or computed for a call that is rejected. Rejections, in this order:

- ``hint`` or ``begin`` given: ValueError (DeepSelect supports neither; tessera's backend does support
  ``begin``, see deep_select_cuda);
- ``topk`` not an int: TypeError; outside [1, 4096]: ValueError (before any output is allocated);
- ``indices_type`` not int32/int64: ValueError; ``output_idx`` whose dtype is not ``indices_type``: TypeError;
- a non-bool flag or non-numeric fill value: TypeError; ``input`` not a 2-D bfloat16/float32 array: ValueError;
- then the backend's memory rules (RuntimeError, see deep_select_cuda).

Imports of tessera itself are absolute so the file also works when loaded under DeepSelect's package
name (its interface tests load ``deep_select/interface.py`` next to a fake backend).
"""
import importlib
import numbers

import ml_dtypes
import numpy as np

from tessera import _C
from tessera._arrays import is_torch_tensor, to_ref, torch_module
from tessera._errors import ArgumentTypeError, InvalidArgumentError, out_of_memory

_backend = importlib.import_module(".deep_select_cuda", __package__)

_FN = "topk"
_NP_TYPES = {"int32": np.int32, "int64": np.int64, "float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def get_stride_requirement():
    """(input row stride, output row stride) alignments in bytes, from the backend: (1024, 32) for
    tessera's (DeepSelect's GPU values; tessera itself needs neither)."""
    return tuple(_backend.get_alignment_requirement())


def _index_type_name(indices_type, torch_input: bool) -> str:
    if indices_type is None:  # DeepSelect's default, torch.int64 (numpy.int64 for numpy input)
        return "int64"
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


def _dtype_name(x, arg: str = "input") -> str:
    if is_torch_tensor(x):
        return str(x.dtype).replace("torch.", "")
    if not isinstance(x, np.ndarray):
        raise ArgumentTypeError(f"{_FN}: argument '{arg}' must be a numpy array or a torch CPU tensor, "
                                f"got {type(x).__name__}")
    return x.dtype.name


def _empty_padded(rows: int, cols: int, dtype_name: str, like_input):
    """[rows, cols] whose row stride is rounded up to the backend's output stride requirement."""
    itemsize = np.dtype(_NP_TYPES[dtype_name]).itemsize
    per_row = max(1, get_stride_requirement()[1] // itemsize)
    padded = (cols + per_row - 1) // per_row * per_row
    if is_torch_tensor(like_input):
        torch = torch_module()
        return torch.empty((rows, padded), dtype=getattr(torch, dtype_name), device=like_input.device)[:, :cols]
    try:
        return np.empty((rows, padded), dtype=_NP_TYPES[dtype_name])[:, :cols]
    except MemoryError:
        raise out_of_memory(_FN, "the outputs", (rows, padded), itemsize) from None


def _int(arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{_FN}: argument '{arg}' must be an int, got {type(value).__name__}")
    return int(value)


def _bool(arg: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{_FN}: argument '{arg}' must be a bool, got {type(value).__name__}")
    return bool(value)


def topk(input, topk, sorted=False, begin=None, end=None, indices_type=None, sorted_index=False, hint=None,
         output_idx=None, output_idx_offset=None, idx_oob_fill_value=2147483647,
         value_oob_fill_value=float("-inf"), return_value=True, abort_when_nan_found=True):
    """The ``topk`` largest entries of each row of ``input`` [b, V] (bfloat16 or float32).

    end: optional int32 [b], each row's length (default V). indices_type: int32 or int64 (torch or numpy
    dtype; default int64). output_idx: optional [b, topk] array of that dtype to write the indices into
    (returned as is). output_idx_offset: optional int32 [b] added to every real index. A row of length
    <= topk returns its entries first, then idx_oob_fill_value / value_oob_fill_value (the fill index
    is not offset). Returns (values or None, indices), the caller's kind of array; outputs allocated
    here have their row stride padded to get_stride_requirement()[1] bytes (non-contiguous views).
    """
    if hint is not None:
        raise InvalidArgumentError(f"{_FN}: argument 'hint' is not supported (DeepSelect does not support it either)")
    if begin is not None:
        raise InvalidArgumentError(f"{_FN}: argument 'begin' is not supported (DeepSelect does not support it "
                                   "either); pass end, or call the backend deep_select_cuda.topk for row ranges")
    k = _int("topk", topk)
    if not 1 <= k <= _C.select_max_topk:
        raise InvalidArgumentError(f"{_FN}: argument 'topk' must be in [1, {_C.select_max_topk}], got {k}")
    torch_input = is_torch_tensor(input)
    idx_name = _index_type_name(indices_type, torch_input)
    if output_idx is not None and _dtype_name(output_idx, "output_idx") != idx_name:
        raise ArgumentTypeError(f"{_FN}: argument 'output_idx' must have dtype indices_type ({idx_name}), "
                        f"got {_dtype_name(output_idx, 'output_idx')}")
    sorted_ = _bool("sorted", sorted)
    sorted_index = _bool("sorted_index", sorted_index)
    return_value = _bool("return_value", return_value)
    abort = _bool("abort_when_nan_found", abort_when_nan_found)
    idx_fill = _int("idx_oob_fill_value", idx_oob_fill_value)
    if not isinstance(value_oob_fill_value, numbers.Real):
        raise ArgumentTypeError(f"{_FN}: argument 'value_oob_fill_value' must be a float, "
                        f"got {type(value_oob_fill_value).__name__}")
    in_ref = to_ref(input, _FN, "input")
    if len(in_ref.shape) != 2:
        raise InvalidArgumentError(f"{_FN}: argument 'input' must be 2-D [b, vocab_size], got shape "
                                   f"{list(in_ref.shape)}")
    in_dtype = _dtype_name(input)
    if in_dtype not in ("bfloat16", "float32"):
        raise InvalidArgumentError(f"{_FN}: argument 'input' must have dtype bfloat16 or float32, got {in_dtype}")
    rows = in_ref.shape[0]
    values = _empty_padded(rows, k, in_dtype, input) if return_value else None
    if output_idx is None:
        output_idx = _empty_padded(rows, k, idx_name, input)
    _backend.topk(input, k, None, end, sorted_, sorted_index, values, output_idx, output_idx_offset, idx_fill,
                  float(value_oob_fill_value), return_value, abort)
    return values, output_idx
