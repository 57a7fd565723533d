"""Turning the ep component's output tensors (``_C.EpTensor``) into numpy arrays that share their
memory, and back into torch tensors when the caller passed torch tensors."""
import ml_dtypes
import numpy as np

from .._arrays import is_torch_tensor, like

_NUMPY = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
}


def to_numpy(tensor):
    """A numpy array over an ``EpTensor``'s memory (it keeps the tensor alive); None stays None."""
    if tensor is None:
        return None
    dtype = _NUMPY[tensor.dtype]
    memory = tensor.memory()
    flat = memory.view(dtype) if memory.size else np.empty(0, dtype)
    shape = tuple(tensor.shape)
    if flat.size == 0:
        return np.empty(shape, dtype)
    strides = tuple(s * dtype.itemsize for s in tensor.strides)
    return np.lib.stride_tricks.as_strided(flat, shape=shape, strides=strides)


def output(tensor, reference):
    """``to_numpy``, as a torch tensor when ``reference`` is one."""
    array = to_numpy(tensor)
    if array is None or not is_torch_tensor(reference):
        return array
    return like(array, reference)
