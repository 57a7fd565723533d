"""Marshalling numpy arrays into the native layer (torch tensors: test_torch_interop.py)."""
import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera._arrays import to_ref


@pytest.mark.parametrize("dtype, name", [
    (np.float32, "float32"), (np.float64, "float64"), (np.float16, "float16"),
    (ml_dtypes.bfloat16, "bfloat16"), (ml_dtypes.float8_e4m3fn, "float8_e4m3fn"),
    (ml_dtypes.float8_e5m2, "float8_e5m2"), (ml_dtypes.float8_e8m0fnu, "float8_e8m0fnu"),
    (np.int8, "int8"), (np.uint8, "uint8"), (np.int32, "int32"), (np.int64, "int64"), (np.bool_, "bool"),
])
def test_dtype_names_pointer_shape_and_element_strides(dtype, name):
    base = np.zeros((6, 10), dtype=dtype)
    view = base[1:5:2, 2:9]
    ref = to_ref(view, "fn", "x")
    assert ref.dtype == name
    assert ref.ptr == view.__array_interface__["data"][0] == base.ctypes.data + (10 + 2) * base.itemsize
    assert list(ref.shape) == [2, 7]
    assert list(ref.strides) == [20, 1]


def test_negative_and_transposed_strides_are_passed_in_elements():
    a = np.zeros((4, 5), dtype=ml_dtypes.bfloat16)
    assert list(to_ref(a.T, "fn", "x").strides) == [1, 5]
    assert list(to_ref(a[::-1], "fn", "x").strides) == [-5, 1]


def test_byte_strides_that_are_not_a_multiple_of_the_itemsize_are_rejected():
    buf = np.zeros(64, dtype=np.uint8)
    odd = np.ndarray((3, 4), dtype=np.float32, buffer=buf, strides=(13, 4))
    with pytest.raises(ValueError, match="fn: argument 'x' has a byte stride of 13 in dimension 0"):
        to_ref(odd, "fn", "x")


def test_unknown_dtypes_are_rejected_naming_the_argument():
    with pytest.raises(tessera.InvalidArgumentError, match="fn: argument 'q' has unsupported dtype complex64"):
        to_ref(np.zeros(3, np.complex64), "fn", "q")


def test_unpacked_fp4_is_rejected_with_the_packing_rule():
    with pytest.raises(ValueError, match="argument 'b' has dtype float4_e2m1fn .* pass packed FP4 as int8"):
        to_ref(np.zeros(4, ml_dtypes.float4_e2m1fn), "fn", "b")


def test_read_only_outputs_are_rejected():
    d = np.zeros((2, 2), np.float32)
    d.flags.writeable = False
    to_ref(d, "fn", "d")  # fine as an input
    with pytest.raises(ValueError, match="argument 'd' is an output and must be writable"):
        to_ref(d, "fn", "d", writable=True)


def test_non_arrays_raise_type_error():
    with pytest.raises(TypeError, match="fn: argument 'a' must be a numpy array or a torch CPU tensor, got list"):
        to_ref([1.0, 2.0], "fn", "a")
