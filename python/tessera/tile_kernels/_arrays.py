"""Argument handling shared by tessera.tile_kernels: numpy arrays and torch CPU tensors in, outputs of
the caller's kind out, and checks that raise tessera's named errors before any output is written.

TileKernels takes torch tensors only; tessera also takes numpy arrays (ml_dtypes for bf16 / fp8) and
returns numpy arrays for them. Torch is never imported here (``tessera._arrays.torch_module``).
"""
import numbers

import ml_dtypes
import numpy as np

from .._arrays import is_torch_tensor, torch_module
from .._errors import ArgumentTypeError, InvalidArgumentError, invalid_argument

NUMPY_DTYPES = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
}
_NUMPY_NAMES = {v: k for k, v in NUMPY_DTYPES.items()}


def is_array(x) -> bool:
    return isinstance(x, np.ndarray) or is_torch_tensor(x)


def dtype_name(x) -> str:
    """The dtype of a numpy array or torch tensor as a name of NUMPY_DTYPES ('?' for others)."""
    if isinstance(x, np.ndarray):
        return _NUMPY_NAMES.get(x.dtype, str(x.dtype))
    return str(x.dtype).replace("torch.", "")


def dtype_spelling(dtype) -> str:
    """A dtype given as a torch dtype, numpy dtype / type or name, as a name of NUMPY_DTYPES."""
    if isinstance(dtype, str):
        return dtype
    try:
        return _NUMPY_NAMES.get(np.dtype(dtype), str(dtype))
    except TypeError:
        return str(dtype).replace("torch.", "")


def require_array(fn: str, arg: str, x, dtypes=None, ndim=None, last_contiguous=True):
    """Checks that x is a numpy array or a CPU torch tensor of one of ``dtypes`` with ``ndim`` dims."""
    if not is_array(x):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a torch CPU tensor or a numpy array, got "
                                f"{type(x).__name__}")
    if is_torch_tensor(x) and x.device.type != "cpu":
        raise invalid_argument(fn, arg, f"must be a CPU tensor, got device {x.device}")
    if ndim is not None and x.ndim != ndim:
        raise invalid_argument(fn, arg, f"must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if dtypes is not None and dtype_name(x) not in dtypes:
        raise invalid_argument(fn, arg, f"must have dtype {' or '.join(dtypes)}, got {dtype_name(x)}")
    if last_contiguous and x.ndim and x.shape[-1] > 1 and stride(x, -1) != 1 and np.prod(x.shape) > 0:
        raise invalid_argument(fn, arg, "must have a contiguous last dimension")
    return x


def require_int(fn: str, arg: str, v, allowed=None, minimum=None):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be an int, got {type(v).__name__}")
    if allowed is not None and int(v) not in allowed:
        raise invalid_argument(fn, arg, f"must be one of {sorted(allowed)}, got {v}")
    if minimum is not None and v < minimum:
        raise invalid_argument(fn, arg, f"must be >= {minimum}, got {v}")
    return int(v)


def require_choice(fn: str, arg: str, v, choices):
    if v not in choices:
        raise invalid_argument(fn, arg, f"must be one of {', '.join(repr(c) for c in choices)}, got {v!r}")
    return v


def require_pair(fn: str, arg: str, v):
    if not isinstance(v, (tuple, list)) or len(v) != 2 or not all(
            isinstance(e, numbers.Integral) and not isinstance(e, bool) and e > 0 for e in v):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a pair of positive ints, got {v!r}")
    return int(v[0]), int(v[1])


def stride(x, dim: int) -> int:
    """Stride of dimension ``dim`` in elements."""
    if isinstance(x, np.ndarray):
        return x.strides[dim] // x.dtype.itemsize
    return x.stride(dim)


def is_contiguous(x) -> bool:
    if isinstance(x, np.ndarray):
        return x.flags.c_contiguous
    return x.is_contiguous()


def alloc(like, shape, dtype: str, zero: bool = False):
    """A new array of the caller's kind (torch when ``like`` is a torch tensor)."""
    shape = tuple(int(s) for s in shape)
    if is_torch_tensor(like):
        torch = torch_module()
        make = torch.zeros if zero else torch.empty
        return make(shape, dtype=getattr(torch, dtype))
    return (np.zeros if zero else np.empty)(shape, dtype=NUMPY_DTYPES[dtype])


def view_as(x, dtype: str):
    """The same bytes read as another dtype (last dimension rescaled)."""
    if is_torch_tensor(x):
        return x.view(getattr(torch_module(), dtype))
    return x.view(NUMPY_DTYPES[dtype])


def as_words(x):
    """A 2-D array's rows as int32 words (the same bytes), or None where the rows are not whole,
    contiguous, 4-byte aligned words: copies of words take full vectors for any element size."""
    if is_torch_tensor(x):
        itemsize, offset, address = x.element_size(), x.storage_offset(), x.data_ptr()
    else:
        itemsize, offset, address = x.dtype.itemsize, 0, x.__array_interface__["data"][0]
    if (x.ndim != 2 or stride(x, 1) != 1 or (x.shape[1] * itemsize) % 4 or (stride(x, 0) * itemsize) % 4
            or (offset * itemsize) % 4 or address % 4):
        return None
    return view_as(x, "int32")


def transpose(x):
    return x.T if isinstance(x, np.ndarray) else x.t()


def check_same_kind(fn: str, **arrays):
    """Torch and numpy arguments are not mixed in one call (the outputs follow the first)."""
    kinds = {name: is_torch_tensor(a) for name, a in arrays.items() if a is not None}
    if len(set(kinds.values())) > 1:
        raise InvalidArgumentError(f"{fn}: arguments {', '.join(kinds)} mix torch tensors and numpy arrays")
