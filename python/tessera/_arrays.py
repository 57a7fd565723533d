"""Array marshalling between Python and the native module.

Every array argument crosses into C++ as a ``_C.ArrayRef``: the data pointer as an integer, a dtype
name, the shape and the strides in elements. Numpy arrays (with the ``ml_dtypes`` float types) and
torch CPU tensors are accepted; torch is never imported here - a tensor can only be passed if the
caller already imported torch, so ``sys.modules`` tells whether to look for one.

Packed FP4 follows DeepGEMM: int8 (or uint8, or torch.float4_e2m1fn_x2) bytes holding two e2m1 values,
element 2i in the low nibble. ``ml_dtypes.float4_e2m1fn`` stores one value per byte, so it is refused
as an operand (tessera._C.cast_from_f32 / to_f32 still encode and decode it).
"""
import sys

import ml_dtypes
import numpy as np

from . import _C
from ._errors import ArgumentTypeError, invalid_argument, out_of_memory

# numpy dtype -> native dtype name (tessera/core/dtype.h: dtype_from_name).
_NUMPY_DTYPES = {
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
    np.dtype(np.float16): "float16",
    np.dtype(ml_dtypes.bfloat16): "bfloat16",
    np.dtype(ml_dtypes.float8_e4m3fn): "float8_e4m3fn",
    np.dtype(ml_dtypes.float8_e5m2): "float8_e5m2",
    np.dtype(ml_dtypes.float8_e8m0fnu): "float8_e8m0fnu",
    np.dtype(np.int8): "int8",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
    np.dtype(np.bool_): "bool",
}
_UNPACKED_FP4 = np.dtype(ml_dtypes.float4_e2m1fn)

# torch dtype attribute name -> native dtype name; filled on first use (newer dtypes may be missing).
_TORCH_DTYPE_NAMES = {
    "float32": "float32",
    "float64": "float64",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "float8_e8m0fnu": "float8_e8m0fnu",
    "float4_e2m1fn_x2": "float4_e2m1fn_x2",
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "int64": "int64",
    "bool": "bool",
}
_torch_dtypes = None

# Integer types the native dtype set (tessera/core/dtype.h) lacks. Tile-language kernels take them (TileKernels'
# uint32 bit fields): with bits_carriers=True they cross as the native type of the same width, and the
# kernel's parameter dtype gives the bits their meaning back (tl's dtype_matches). Library functions, which
# read an ArrayRef's dtype as the element type, keep refusing them.
BITS_CARRIERS = {"int16": "float16", "uint16": "float16", "uint32": "int32", "uint64": "int64"}


def torch_module():
    """The torch module if the program imported it, else None (tessera never imports torch itself)."""
    return sys.modules.get("torch")


def is_torch_tensor(x) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_dtype_table(torch):
    global _torch_dtypes
    if _torch_dtypes is None:
        _torch_dtypes = {getattr(torch, attr): name for attr, name in _TORCH_DTYPE_NAMES.items()
                         if hasattr(torch, attr)}
    return _torch_dtypes


def _supported_names() -> str:
    return ", ".join(sorted(set(_NUMPY_DTYPES.values())))


def _row_major_strides(shape) -> list:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def dtype_name(x) -> str:
    """The element type's name of a numpy array or torch tensor ("uint32", "bfloat16", ...)."""
    return str(x.dtype).rsplit(".", 1)[-1]


def _numpy_ref(x: np.ndarray, fn: str, arg: str, writable: bool, bits_carriers: bool = False):
    name = _NUMPY_DTYPES.get(x.dtype)
    if name is None and bits_carriers:
        name = BITS_CARRIERS.get(x.dtype.name)
    if name is None:
        if x.dtype == _UNPACKED_FP4:
            raise invalid_argument(fn, arg, "has dtype float4_e2m1fn (one value per byte); pass packed FP4 "
                                   "as int8 with two e2m1 values per byte, element 2i in the low nibble")
        raise invalid_argument(fn, arg, f"has unsupported dtype {x.dtype}; supported: {_supported_names()}")
    if writable and not x.flags.writeable:
        raise invalid_argument(fn, arg, "is an output and must be writable, got a read-only array")
    if x.size == 0:  # numpy gives empty arrays arbitrary strides (even 0); any layout describes them
        return _C.ArrayRef(x.__array_interface__["data"][0], name, list(x.shape), _row_major_strides(x.shape))
    itemsize = x.dtype.itemsize
    strides = []
    for dim, s in enumerate(x.strides):
        if s % itemsize:
            raise invalid_argument(fn, arg, f"has a byte stride of {s} in dimension {dim}, not a multiple of "
                                   f"its itemsize {itemsize}")
        strides.append(s // itemsize)
    return _C.ArrayRef(x.__array_interface__["data"][0], name, list(x.shape), strides)


def _torch_ref(x, torch, fn: str, arg: str, bits_carriers: bool = False):
    if x.device.type != "cpu":
        raise invalid_argument(fn, arg, f"must be a CPU tensor, got device {x.device}")
    if x.layout != torch.strided:
        raise invalid_argument(fn, arg, f"must be a dense (strided) tensor, got layout {x.layout}")
    name = _torch_dtype_table(torch).get(x.dtype)
    if name is None and bits_carriers:
        name = BITS_CARRIERS.get(dtype_name(x))
    if name is None:
        raise invalid_argument(fn, arg, f"has unsupported dtype {x.dtype}; supported: {_supported_names()}")
    strides = list(x.stride()) if x.numel() else _row_major_strides(x.shape)
    return _C.ArrayRef(x.data_ptr(), name, list(x.shape), strides)


def to_ref(x, fn: str, arg: str, writable: bool = False, bits_carriers: bool = False):
    """``_C.ArrayRef`` for a numpy array or a torch CPU tensor; ``fn`` and ``arg`` name the public
    function and argument in error messages. Raises InvalidArgumentError (a ValueError) for an
    unsupported dtype, a non-CPU tensor, a byte stride that is not a multiple of the itemsize, or a
    read-only output; TypeError for anything that is not an array. ``bits_carriers``: accept the
    types of BITS_CARRIERS (int16, uint16/32/64), passed as their carrier type (for tl kernels)."""
    if isinstance(x, np.ndarray):
        return _numpy_ref(x, fn, arg, writable, bits_carriers)
    torch = torch_module()
    if torch is not None and isinstance(x, torch.Tensor):
        return _torch_ref(x, torch, fn, arg, bits_carriers)
    raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a numpy array or a torch CPU tensor, "
                            f"got {type(x).__name__}")


def optional_ref(x, fn: str, arg: str, writable: bool = False):
    return None if x is None else to_ref(x, fn, arg, writable)


# ---- conversions used by utilities that compute in numpy and return the caller's kind of array ----

def to_numpy(x, fn: str = "", arg: str = "") -> np.ndarray:
    """A numpy view (torch CPU tensor: shared memory where the dtype allows) of an array; ``fn`` and
    ``arg`` name the public function and argument in the error for anything else."""
    where = f"{fn}: argument '{arg}' " if fn else ""
    if isinstance(x, np.ndarray):
        return x
    if is_torch_tensor(x):
        torch = torch_module()
        if x.device.type != "cpu":
            raise ArgumentTypeError(f"{where}expected a CPU tensor, got device {x.device}")
        x = x.detach()
        # numpy has no bfloat16/float8: reinterpret the bytes as ints, then as the ml_dtypes type.
        special = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
                   torch.float8_e4m3fn: (torch.int8, ml_dtypes.float8_e4m3fn),
                   torch.float8_e5m2: (torch.int8, ml_dtypes.float8_e5m2)}
        if hasattr(torch, "float8_e8m0fnu"):
            special[torch.float8_e8m0fnu] = (torch.int8, ml_dtypes.float8_e8m0fnu)
        if x.dtype in special:
            as_int, np_type = special[x.dtype]
            return x.view(as_int).numpy().view(np_type)
        return x.numpy()
    raise ArgumentTypeError(f"{where}must be a numpy array or a torch CPU tensor, got {type(x).__name__}")


def like(result: np.ndarray, reference):
    """``result`` as the same kind of array as ``reference`` (numpy stays numpy; torch gets a tensor
    sharing ``result``'s memory)."""
    if not is_torch_tensor(reference):
        return result
    torch = torch_module()
    special = {np.dtype(ml_dtypes.bfloat16): (np.int16, torch.bfloat16),
               np.dtype(ml_dtypes.float8_e4m3fn): (np.int8, torch.float8_e4m3fn),
               np.dtype(ml_dtypes.float8_e5m2): (np.int8, torch.float8_e5m2)}
    if hasattr(torch, "float8_e8m0fnu"):
        special[np.dtype(ml_dtypes.float8_e8m0fnu)] = (np.int8, torch.float8_e8m0fnu)
    if result.dtype in special:
        as_int, torch_type = special[result.dtype]
        return torch.from_numpy(result.view(as_int)).view(torch_type)
    return torch.from_numpy(result)


def shares_own_memory(v) -> bool:
    """Whether two elements of the numpy view v may share memory: by increasing |stride|, each stride
    must clear the extent of the dimensions before it (the test tessera's C++ outputs use)."""
    if v.size == 0:
        return False
    extent = v.itemsize
    for stride, size in sorted((abs(st), n) for st, n in zip(v.strides, v.shape) if n > 1):
        if stride < extent:
            return True
        extent += stride * (size - 1)
    return False


def new_output(fn: str, what: str, shape, dtype) -> np.ndarray:
    """np.empty for a call's result; an allocation the machine cannot serve raises a named error."""
    try:
        return np.empty(shape, dtype=dtype)
    except MemoryError:
        raise out_of_memory(fn, what, shape, np.dtype(dtype).itemsize) from None
