"""int64 `%` in a vectorized T.Parallel loop (floor modulo, Python's rule) against numpy: divisors in
[1, 2^31) take the runtime's float64 quotient steps at AVX-512, vectors with any other divisor the
scalar loop. Integer `//` and `%` are total, as numpy's are: a zero divisor gives 0 (masked-off tail
lanes load zeros) and MIN // -1 wraps, where x86's division instruction would trap."""
import pytest
import numpy as np

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


@tessera.jit(out_idx=[-1])
def floormod(n):
    @T.prim_func
    def main(a: T.Tensor((n,), "int64"), b: T.Tensor((n,), "int64"), r: T.Tensor((n,), "int64")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                r[i] = a[i] % b[i]
    return main


@tessera.jit(out_idx=[-2, -1])
def floordiv_and_mod(n, dtype):
    @T.prim_func
    def main(a: T.Tensor((n,), dtype), b: T.Tensor((n,), dtype), q: T.Tensor((n,), dtype),
             r: T.Tensor((n,), dtype)):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                q[i] = a[i] // b[i]
                r[i] = a[i] % b[i]
    return main


def dividends(rng, d):
    """Edges of the int64 range and multiples of d with their neighbours, then random 64-bit values."""
    k = rng.integers(-(2 ** 62), 2 ** 62, size=d.size) // np.maximum(d, 1)
    edges = np.array([0, 1, -1, I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1, 2 ** 62, -(2 ** 62), 2 ** 53 + 1])
    a = rng.integers(I64_MIN, I64_MAX, size=d.size, dtype=np.int64, endpoint=True)
    a[: edges.size] = edges
    third = d.size // 3
    a[third:2 * third] = k[third:2 * third] * d[third:2 * third] + rng.integers(-1, 2, size=third)
    return a


def test_int64_floormod_by_divisors_below_2_31(rng):
    n = 16 * 257
    d = rng.integers(1, 2 ** 31, size=n, dtype=np.int64)
    d[:64] = np.repeat([1, 2, 3, 2 ** 31 - 1], 16)
    a = dividends(rng, d)
    np.testing.assert_array_equal(floormod(n)(a, d), np.mod(a, d))


def test_int64_floormod_with_large_or_negative_divisors(rng):
    n = 16 * 65
    d = rng.integers(1, 2 ** 31, size=n, dtype=np.int64)
    d[5] = 2 ** 31                                      # one lane past the range: the vector goes scalar
    d[16 * 7 + 3] = -7
    d[16 * 20:16 * 21] = rng.integers(2 ** 31, 2 ** 62, size=16)
    d[16 * 30:16 * 31] = -rng.integers(1, 2 ** 40, size=16)
    a = dividends(rng, d)
    np.testing.assert_array_equal(floormod(n)(a, d), np.mod(a, d))


def test_int64_floormod_edges_against_every_divisor_range():
    """Each edge dividend against divisors at the ends of the AVX-512 path's range [1, 2^31) and
    beyond, in whole vectors of one divisor."""
    edges = np.array([0, 1, -1, I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1, 2 ** 62, -(2 ** 62), 2 ** 53 + 1,
                      2 ** 51, -(2 ** 51), 2 ** 51 + 4095, 12345678901234567, -98765432109876543, 4096 * 4097 - 1],
                     dtype=np.int64)
    divisors = [1, 2, 4095, 4096, 4097, 65537, 1000003, 2 ** 30 + 3, 2 ** 31 - 1, 2 ** 31, 2 ** 40 + 7]
    a = np.tile(edges, len(divisors))
    d = np.repeat(np.array(divisors, dtype=np.int64), edges.size)
    np.testing.assert_array_equal(floormod(a.size)(a, d), np.mod(a, d))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_division_by_zero_and_min_by_minus_one_do_not_trap(rng, dtype):
    """A tail of 5 lanes past whole vectors, every seventh divisor 0, and MIN against -1: the results
    numpy gives (0 for a zero divisor, MIN // -1 = MIN, MIN % -1 = 0), and no SIGFPE."""
    info = np.iinfo(dtype)
    n = 16 * 9 + 5
    d = rng.integers(-50, 50, size=n).astype(dtype)
    d[::7] = 0
    d[3] = d[n - 1] = -1
    a = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    a[3] = a[n - 1] = info.min
    q, r = floordiv_and_mod(n, dtype)(a, d)
    with np.errstate(divide="ignore", over="ignore"):
        np.testing.assert_array_equal(q, np.floor_divide(a, d))
        np.testing.assert_array_equal(r, np.mod(a, d))
