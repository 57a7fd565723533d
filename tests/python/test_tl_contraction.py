"""Kernels compile with -ffp-contract=off: `a * b + c` rounds the product and the sum separately (as numpy
and torch do), bit for bit, in vector code and in per-thread scalar code; `T.fma` rounds once."""
from fractions import Fraction

import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T

RNG = np.random.default_rng(5)


@tessera.jit(out_idx=[-1])
def multiply_add(rows, cols, fused):
    @T.prim_func
    def main(a: T.Tensor((rows, cols), "float32"), b: T.Tensor((rows, cols), "float32"),
             c: T.Tensor((rows, cols), "float32"), out: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1) as _:
            for i, j in T.Parallel(rows, cols):
                out[i, j] = T.fma(a[i, j], b[i, j], c[i, j]) if fused else a[i, j] * b[i, j] + c[i, j]
    return main


@tessera.jit(out_idx=[-1])
def multiply_add_per_thread(n, threads):
    @T.prim_func
    def main(a: T.Tensor((n,), "float32"), b: T.Tensor((n,), "float32"), c: T.Tensor((n,), "float32"),
             out: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as (pid,):
            i = pid * threads + T.get_thread_binding()
            if i < n:
                out[i] = a[i] * b[i] - c[i] * a[i]
    return main


def operands(shape):
    """Products that round: mantissas of 24 bits, sums that cancel the product's leading bits."""
    a = RNG.uniform(-2, 2, shape).astype(np.float32)
    b = RNG.uniform(-2, 2, shape).astype(np.float32)
    c = (-(a.astype(np.float64) * b) * RNG.uniform(0.5, 1.5, shape)).astype(np.float32)
    return a, b, c


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (5, 67)])
def test_multiply_add_rounds_twice_like_numpy(shape):
    a, b, c = operands(shape)
    out = multiply_add(*shape, False)(a, b, c)
    np.testing.assert_array_equal(out.view(np.uint32), (a * b + c).view(np.uint32))


def test_per_thread_code_rounds_twice_like_numpy():
    n = 301
    a, b, c = operands((n,))
    out = multiply_add_per_thread(n, 32)(a, b, c)
    np.testing.assert_array_equal(out.view(np.uint32), (a * b - c * a).view(np.uint32))


def test_t_fma_rounds_once():
    shape = (3, 41)
    a, b, c = operands(shape)
    a[0, 0] = b[0, 0] = 1 + 2.0 ** -12  # (1 + 2^-12)^2 - 1 needs the unrounded product
    c[0, 0] = -1
    out = multiply_add(*shape, True)(a, b, c)
    exact = [np.float32(float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))))
             for x, y, z in zip(a.ravel(), b.ravel(), c.ravel())]
    np.testing.assert_array_equal(out.ravel().view(np.uint32), np.array(exact, np.float32).view(np.uint32))
    assert out[0, 0] == np.float32(2.0 ** -11 + 2.0 ** -24)
    assert (out != a * b + c).sum() > shape[0] * shape[1] // 4  # the inputs make fusing visible
