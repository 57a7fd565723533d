"""numpy dtypes of tile-language element types (for allocating outputs and test inputs)."""
import ml_dtypes
import numpy as np

NUMPY = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float4_e2m1": np.dtype(np.int8),  # packed: two codes per byte
}
PACKED = "float4_e2m1"


def numpy_dtype(name):
    return NUMPY[name]


def logical_shape(name, shape):
    """The shape a kernel declares for an array of this storage shape (a packed float4 array holds
    two elements per byte of its last dimension)."""
    shape = tuple(int(s) for s in shape)
    return shape[:-1] + (2 * shape[-1],) if name == PACKED and shape else shape


def storage_shape(name, shape, fn, arg):
    """The array shape that holds a tensor of this declared shape (inverse of logical_shape)."""
    shape = tuple(shape)
    if name != PACKED or not shape:
        return shape
    if shape[-1] % 2:
        from .._errors import InvalidArgumentError

        raise InvalidArgumentError(f"{fn}: cannot allocate '{arg}': a packed float4 tensor needs an even last "
                                   f"dimension, got shape {shape}")
    return shape[:-1] + (shape[-1] // 2,)
