"""Tensors of the integer types tessera's library dtypes lack (int16, uint16, uint32, uint64: TileKernels'
e5m6 bit fields are uint32) pass to tl kernels as numpy arrays and torch tensors, as inputs and as
outputs the kernel allocates; a tensor of another dtype for such a parameter is refused by name."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera import InvalidArgumentError

RNG = np.random.default_rng(23)


@tessera.jit(out_idx=[-1])
def shift_xor(dtype, rows, cols):
    @T.prim_func
    def main(a: T.Tensor((rows, cols), dtype), b: T.Tensor((rows, cols), dtype), out: T.Tensor((rows, cols), dtype)):
        with T.Kernel(rows) as r:
            for j in T.Parallel(cols):
                out[r, j] = (a[r, j] >> 3) ^ b[r, j]
    return main


def random_bits(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", ["int16", "uint16", "uint32", "uint64"])
def test_numpy_arrays_of_every_width(dtype):
    a, b = random_bits(dtype, (3, 37)), random_bits(dtype, (3, 37))
    out = shift_xor(dtype, 3, 37)(a, b)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, (a >> 3) ^ b)


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_torch_tensors(dtype):
    torch = pytest.importorskip("torch")
    if not hasattr(torch, dtype):
        pytest.skip(f"torch has no {dtype}")
    a, b = random_bits(dtype, (5, 19)), random_bits(dtype, (5, 19))
    out = shift_xor(dtype, 5, 19)(torch.from_numpy(a), torch.from_numpy(b))
    assert out.dtype == getattr(torch, dtype)
    np.testing.assert_array_equal(out.numpy(), (a >> 3) ^ b)


def test_strided_uint32_view():
    a, b = random_bits("uint32", (8, 41)), random_bits("uint32", (4, 40))
    out = shift_xor("uint32", 4, 40)(a[::2, 1:], b)
    np.testing.assert_array_equal(out, (a[::2, 1:] >> 3) ^ b)


@pytest.mark.parametrize("param,given", [("uint32", "int32"), ("int32", "uint32"), ("uint16", "float16"),
                                         ("uint64", "int64")])
def test_a_tensor_of_the_carrier_type_is_refused(param, given):
    a = np.zeros((2, 3), given)
    with pytest.raises(InvalidArgumentError, match=f"argument 'a' must have dtype {param}, got {given}"):
        shift_xor(param, 2, 3)(a, np.zeros((2, 3), param))


def test_library_functions_still_refuse_uint32():
    from tessera._arrays import to_ref

    with pytest.raises(InvalidArgumentError, match="f: argument 'x' has unsupported dtype uint32"):
        to_ref(np.zeros(3, np.uint32), "f", "x")


@tessera.jit(out_idx=[-1])
def row_max(dtype, rows, cols):
    @T.prim_func
    def main(a: T.Tensor((rows, cols), dtype), out: T.Tensor((rows,), dtype)):
        with T.Kernel(1) as _:
            tile = T.alloc_fragment((rows, cols), dtype)
            best = T.alloc_fragment((rows,), dtype)
            T.copy(a[0, 0], tile)
            T.reduce_max(tile, best, dim=1)
            T.copy(best, out[0])
    return main


@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_row_max_of_unsigned_values(dtype):
    """TileKernels' lossless block cast takes the largest uint32 exponent of each block."""
    a = random_bits(dtype, (5, 67))
    np.testing.assert_array_equal(row_max(dtype, 5, 67)(a), a.max(axis=1))
