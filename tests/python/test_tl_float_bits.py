"""T.reinterpret(float32 value, uint32 / int32): the IEEE bits computed from the value, checked against
numpy's view of the same float32 array (normals, subnormals, powers of two and their neighbours,
infinities, NaN)."""
import numpy as np

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T

RNG = np.random.default_rng(3)


@tessera.jit(out_idx=[-1])
def float_bits(n, as_type):
    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), bits: T.Tensor((n,), "int64")):
        with T.Kernel(1) as _:
            for i in T.serial(n):
                bits[i] = T.cast(T.reinterpret(x[i], as_type), "int64")
    return main


def special_values():
    one, eight = np.float32(1), np.float32(8)
    return np.array([0.0, 1.0, -1.0, 0.5, 3.0, 1e-4, 65504.0, 1.17549435e-38, 1.4e-45, 3e-41, 3.4028235e38,
                     np.inf, -np.inf, np.nan, np.nextafter(one, np.float32(2)), np.nextafter(eight, np.float32(0)),
                     np.nextafter(np.float32(2.0 ** -126), np.float32(0))], np.float32)


def test_float32_bits_as_uint32_match_numpy():
    wide = RNG.standard_normal(1501) * 10.0 ** RNG.integers(-44, 38, 1501)
    with np.errstate(over="ignore"):
        x = np.concatenate([special_values(), wide.astype(np.float32)])
    want = x.view(np.uint32).astype(np.int64)
    want[np.isnan(x)] = 0x7FC00000  # every NaN gives the canonical quiet NaN
    np.testing.assert_array_equal(float_bits(len(x), T.uint32)(x), want)


def test_float32_bits_as_int32_are_signed():
    x = np.array([-2.0, 2.0, -1e-40], np.float32)
    np.testing.assert_array_equal(float_bits(3, T.int32)(x), x.view(np.int32).astype(np.int64))


@tessera.jit(out_idx=[-1])
def negative_zero_where_positive(n):
    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                y[i] = T.if_then_else(x[i] > 0, T.float32(-0.0), x[i])
    return main


def test_negative_zero_constant_keeps_its_sign_in_vector_lanes():
    """A -0.0 constant broadcast into vector lanes stays -0.0 (a broadcast built as 0 + c gave +0.0),
    in whole vectors and the tail."""
    n = 67
    x = RNG.standard_normal(n).astype(np.float32)
    y = negative_zero_where_positive(n)(x)
    want = np.where(x > 0, np.float32(-0.0), x)
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
