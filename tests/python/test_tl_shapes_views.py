"""Tensor dimensions given as expressions of T.dynamic symbols (checked and sized at every call) and
T.reshape / T.view of global tensors and on-chip buffers, checked against numpy float64 references."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera import InvalidArgumentError, NotImplementedInTessera

RNG = np.random.default_rng(7)


@tessera.jit(out_idx=[-1])
def block_sums(block):
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n, 3), "float32"), sums: T.Tensor((T.ceildiv(n, block), 3), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            acc = T.alloc_fragment((3,), "float32")
            T.clear(acc)
            for i in T.serial(block):
                for j in T.Parallel(3):
                    acc[j] += x[bx * block + i, j]  # rows past n read 0
            T.copy(acc, sums[bx, 0])
    return main


def reference_block_sums(x, block):
    x = x.astype(np.float64)
    n = x.shape[0]
    return np.stack([x[i:i + block].sum(0) for i in range(0, n, block)])


@pytest.mark.parametrize("n", [1, 5, 13, 37])
def test_expression_dim_sizes_output(n):
    x = RNG.standard_normal((n, 3)).astype(np.float32)
    got = block_sums(5)(x)
    assert got.shape == (-(-n // 5), 3)
    np.testing.assert_allclose(got, reference_block_sums(x, 5), rtol=1e-5, atol=1e-5)


def test_expression_dim_given_output_is_checked():
    kernel = block_sums(4)
    x = RNG.standard_normal((11, 3)).astype(np.float32)
    out = np.zeros((3, 3), np.float32)
    kernel.call_all([x, out])
    np.testing.assert_allclose(out, reference_block_sums(x, 4), rtol=1e-5, atol=1e-5)
    with pytest.raises(InvalidArgumentError) as info:
        kernel.call_all([x, np.zeros((4, 3), np.float32)])
    text = str(info.value)
    assert "'sums' dimension 0 is 4" in text and "((n + 3) // 4) is 3" in text


@tessera.jit
def pair_rows():
    n, m = T.dynamic("n, m")

    @T.prim_func
    def main(x: T.Tensor((n * 2, m), "float32"), y: T.Tensor((n, T.max(m, 4) - 1), "float32")):
        with T.Kernel(n) as bx:
            for j in T.Parallel(T.max(m, 4) - 1):
                y[bx, j] = x[2 * bx, j] + x[2 * bx + 1, j]
    return main


def test_expression_dims_of_inputs_bound_and_checked():
    kernel = pair_rows()
    x = RNG.standard_normal((6, 7)).astype(np.float32)
    y = np.zeros((3, 6), np.float32)
    kernel.call_all([x, y])
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, (x64[0::2] + x64[1::2])[:, :6], rtol=1e-6)
    with pytest.raises(InvalidArgumentError, match=r"'y' dimension 1 is 7, but its declared size"):
        kernel.call_all([x, np.zeros((3, 7), np.float32)])


def test_expression_of_an_unbound_symbol_is_not_implemented():
    with pytest.raises(NotImplementedInTessera, match=r"reads n, which is not a plain dimension"):
        @tessera.jit
        def only_in_expressions():
            n = T.dynamic("n")

            @T.prim_func
            def main(x: T.Tensor((n * 2,), "float32")):
                with T.Kernel(1):
                    x[0] = 1.0
            return main

        only_in_expressions()


@tessera.jit(out_idx=[-1])
def group_absmax(rows, cols, group):
    @T.prim_func
    def main(x: T.Tensor((rows, cols), "float32"), amax: T.Tensor((rows, cols // group), "float32")):
        with T.Kernel(1):
            x_frag = T.alloc_fragment((rows, cols), "float32")
            amax_frag = T.alloc_fragment((rows, cols // group), "float32")
            grouped = T.reshape(x_frag, (rows, cols // group, group))  # declared before x_frag is filled
            T.copy(x, x_frag)
            for i, j in T.Parallel(rows, cols):
                x_frag[i, j] = x_frag[i, j] * 2.0
            T.reduce_absmax(grouped, amax_frag, dim=2)
            T.copy(amax_frag, amax)
    return main


def test_reshape_of_fragment_reads_its_contents_at_the_reduce():
    x = RNG.standard_normal((5, 21)).astype(np.float32)
    got = group_absmax(5, 21, 7)(x)
    want = np.abs(2.0 * x.astype(np.float64)).reshape(5, 3, 7).max(-1)
    np.testing.assert_array_equal(got, want.astype(np.float32))


@tessera.jit(out_idx=[-1])
def rows_to_view(rows, cols):
    @T.prim_func
    def main(x: T.Tensor((rows, cols), "float32"), y: T.Tensor((rows * cols,), "float32")):
        with T.Kernel(1):
            sums = T.alloc_fragment((rows,), "float32")
            flat = T.alloc_fragment((rows * cols,), "float32")
            as_rows = T.view(flat, (rows, cols))
            T.copy(x, as_rows)  # writes through the view
            T.reduce_sum(as_rows, sums, dim=1)
            T.fill(T.reshape(sums, (rows, 1)), 0.0)
            for i in T.Parallel(rows * cols):
                y[i] = flat[i] + sums[i // cols]
    return main


def test_view_of_fragment_as_copy_destination_and_fill():
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    got = rows_to_view(3, 5)(x)
    np.testing.assert_array_equal(got, x.reshape(-1))  # sums were cleared through the view


@tessera.jit
def masked_copy(rows, cols):
    @T.prim_func
    def main(x: T.Tensor((rows, cols), "int64"), y: T.Tensor((rows, cols), "int64")):
        with T.Kernel(T.ceildiv(rows * cols, 4)) as bx:
            x1 = T.reshape(x, (rows * cols,))
            y1 = T.view(y, (rows * cols,))
            for i in T.Parallel(4):
                k = bx * 4 + i
                y1[k] = T.Select(x1[k] % 3 == 0, T.int64(-1), x1[k])
    return main


def test_reshape_and_view_of_global_tensors():
    x = RNG.integers(-50, 50, size=(5, 7)).astype(np.int64)
    y = np.zeros_like(x)
    masked_copy(5, 7).call_all([x, y])
    np.testing.assert_array_equal(y, np.where(x % 3 == 0, -1, x))


def test_view_with_another_dtype_is_not_implemented():
    with pytest.raises(NotImplementedInTessera, match=r"T.view\(frag, \.\.\., bfloat16\): reinterpreting"):
        @T.prim_func
        def main(x: T.Tensor((4,), "float32")):
            with T.Kernel(1):
                frag = T.alloc_fragment((4,), "float32")
                T.view(frag, (8,), "bfloat16")


def test_reshape_with_another_element_count_is_an_error():
    with pytest.raises(InvalidArgumentError, match=r"12 elements, but 'frag' \[4, 4\] has 16"):
        @T.prim_func
        def main(x: T.Tensor((4,), "float32")):
            with T.Kernel(1):
                frag = T.alloc_fragment((4, 4), "float32")
                T.reshape(frag, (3, 4))


def test_dtype_spellings_of_one_element_type_compare_equal():
    torch = pytest.importorskip("torch")
    assert T.dtype(torch.float8_e4m3fn) == T.float8_e4m3fn  # TileKernels' config check
    assert T.dtype(torch.bfloat16) == "bfloat16" and T.float == "float32"
    assert T.float16 != T.bfloat16 and not (T.float32 != "float32")
    assert {T.float: "x"}[T.dtype("float32")] == "x"


@tessera.jit
def scale_rows(with_scale):
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n, 4), "float32"), scale: T.Tensor((T.ceildiv(n, 2),), "float32"),
             y: T.Tensor((n, 4), "float32")):
        with T.Kernel(n) as row:
            for j in T.Parallel(4):
                y[row, j] = x[row, j] * scale[row // 2] if with_scale else x[row, j]
    return main


def test_absent_optional_tensor_argument_gets_zeros_of_its_shape():
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    y = np.zeros_like(x)
    scale_rows(False).call_all([x, None, y])  # TileLang passes a null pointer for an unused tensor
    np.testing.assert_array_equal(y, x)
    scale = RNG.standard_normal(3).astype(np.float32)
    scale_rows(True).call_all([x, scale, y])
    np.testing.assert_allclose(y, x.astype(np.float64) * np.repeat(scale, 2)[:5, None], rtol=1e-6)


@tessera.jit
def gather_optional(with_table):
    n, m = T.dynamic("n, m")

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), table: T.Tensor((m, 3), "int32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(n) as i:
            y[i] = x[table[i % m, 0]] if with_table else x[i] * 2.0
    return main


def test_absent_tensor_with_a_dimension_of_its_own_is_empty():
    x = RNG.standard_normal(7).astype(np.float32)
    y = np.zeros_like(x)
    gather_optional(False).call_all([x, None, y])  # m: only the absent table has it (TileKernels' optional maps)
    np.testing.assert_array_equal(y, x * 2.0)


def test_absent_tensor_whose_size_no_argument_gives_is_an_error():
    with pytest.raises(InvalidArgumentError, match=r"kernel 'main': cannot size '?\w+'? "):
        scale_rows(False).call_all([None, None, None])
