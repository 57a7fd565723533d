"""T.ptr / T.make_tensor: a kernel reads a table of tensor addresses and makes a tensor of each entry
inside a loop (TileKernels' multilayer mHC recompute). Checked against numpy computing the same float32
operations, with odd widths (masked tails), a dynamic row count, tile copies into and out of the made
tensors, and poisoned outputs."""
import ml_dtypes
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T


@tessera.jit
def layer_chain(h, layers):
    """acc = x; for each layer k: acc = acc * 0.5 + input_k (bf16); output_k = acc."""
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n, h), "float32"), input_ptrs: T.Tensor((layers,), T.ptr),
             output_ptrs: T.Tensor((layers,), T.ptr)):
        with T.Kernel(n) as row:
            acc = T.alloc_fragment((h,), "float32")
            staged = T.alloc_shared((h,), "bfloat16")
            T.copy(x[row, 0], acc)
            for k in T.serial(layers):
                src = T.make_tensor(input_ptrs[k], (n, h), T.bfloat16)
                dst = T.make_tensor(output_ptrs[k], (n, h), T.float32)
                T.copy(src[row, 0], staged)
                for j in T.Parallel(h):
                    acc[j] = acc[j] * 0.5 + staged[j]
                T.copy(acc, dst[row, 0])
    return main


def addresses(arrays):
    return np.array([a.ctypes.data for a in arrays], np.int64)


@pytest.mark.parametrize("n, h, layers", [(1, 16, 1), (5, 37, 3), (9, 130, 4)])
def test_each_layer_reads_and_writes_the_tensors_its_table_names(rng, n, h, layers):
    x = rng.standard_normal((n, h)).astype(np.float32)
    inputs = [rng.standard_normal((n, h)).astype(ml_dtypes.bfloat16) for _ in range(layers)]
    outputs = [np.full((n, h), np.nan, np.float32) for _ in range(layers)]
    layer_chain(h, layers)(x, addresses(inputs), addresses(outputs))
    acc = x.copy()
    for k in range(layers):
        acc = acc * np.float32(0.5) + inputs[k].astype(np.float32)
        np.testing.assert_array_equal(outputs[k], acc)


def test_the_table_is_read_at_every_call(rng):
    """The same compiled kernel follows a new table: nothing about the addresses is baked in."""
    kernel = layer_chain(24, 2)
    x = rng.standard_normal((3, 24)).astype(np.float32)
    for _ in range(2):
        inputs = [rng.standard_normal((3, 24)).astype(ml_dtypes.bfloat16) for _ in range(2)]
        outputs = [np.zeros((3, 24), np.float32) for _ in range(2)]
        kernel(x, addresses(inputs), addresses(outputs))
        want = (x * np.float32(0.5) + inputs[0].astype(np.float32)) * np.float32(0.5) + inputs[1].astype(np.float32)
        np.testing.assert_array_equal(outputs[1], want)


def test_strides_are_refused_by_name():
    def strided():
        @T.prim_func
        def main(ptrs: T.Tensor((1,), T.ptr), y: T.Tensor((4,), "float32")):
            with T.Kernel(1) as _:
                t = T.make_tensor(ptrs[0], (4,), T.float32, strides=(2,))
                for j in T.Parallel(4):
                    y[j] = t[j]
        return main

    with pytest.raises(tessera.NotImplementedInTessera, match=r"T.make_tensor\(strides=...\)"):
        tessera.jit(strided)()
