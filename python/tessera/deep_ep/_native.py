"""Arrays across the native boundary of ``ElasticBuffer`` and ``Buffer``: ``x`` as data and scale
factors, and the ep component's output tensors (``_C.EpTensor``) as numpy arrays that share their
memory, or torch tensors when the caller passed torch tensors."""
import ml_dtypes
import numpy as np

from .._arrays import is_torch_tensor, like
from .._errors import ArgumentTypeError

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


def split_x(fn, x):
    """``x`` of a dispatch as (data, scale_factors): an array alone has no scale factors."""
    if isinstance(x, tuple):
        if len(x) != 2:
            raise ArgumentTypeError(f"{fn}: argument 'x' must be an array or a (data, scale_factors) pair")
        return x[0], x[1]
    return x, None


def received_x(recv_x, recv_sf, data, sf):
    """A dispatch's recv_x: the array, or (array, scale factors) when the input had them."""
    recv = output(recv_x, data)
    if recv_sf is not None:
        recv = (recv, output(recv_sf, sf))
    return recv


def split_bias(bias):
    """combine's ``bias``: None, one array, or a pair."""
    return bias if isinstance(bias, tuple) else (bias, None)
