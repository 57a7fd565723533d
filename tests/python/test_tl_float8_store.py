"""Stores of float32 values into float8 e4m3 tensors (the vector runtime's enc_e4m3, lane arithmetic)
against ml_dtypes' conversion, bit for bit: every e4m3 rounding boundary and its float32 neighbours,
both signs, subnormal codes and float32 subnormals, the overflow edge at 464, infinities and NaN
(sign | 0x7F, as tessera's scalar rule), random magnitudes; odd lengths so the masked tail runs too."""
import ml_dtypes
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


@tessera.jit(out_idx=[-1])
def store_e4m3():
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float8_e4m3")):
        with T.Kernel(T.ceildiv(n, 256), threads=128) as b:
            for i in T.Parallel(256):
                y[b * 256 + i] = x[b * 256 + i]
    return main


def expected_codes(x):
    """ml_dtypes' codes; NaN, inf and values past 464 give sign | 0x7F (e4m3fn has no infinity)."""
    codes = x.astype(E4M3).view(np.uint8).copy()
    special = ~np.isfinite(x) | (np.abs(x) > 464)  # 464 itself is a tie that rounds to 448 (even)
    codes[special] = (np.signbit(x[special]).astype(np.uint8) << 7) | 0x7F
    return codes


def boundary_values():
    """Every e4m3 value, every midpoint between neighbours, and the float32 values one ulp around each."""
    values = np.arange(256, dtype=np.uint8).view(E4M3).astype(np.float32)
    finite = np.unique(np.abs(values[np.isfinite(values)]))
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    points = np.concatenate([finite, mids, [464.0, 480.0, 2.0 ** -10, 2.0 ** -11]]).astype(np.float32)
    around = np.concatenate([points, np.nextafter(points, np.float32(np.inf)),
                             np.nextafter(points, np.float32(0))])
    return np.concatenate([around, -around])


@pytest.mark.parametrize("n", [1, 255, 1000])
def test_random_values_of_every_magnitude(rng, n):
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-16, 10, size=n))).astype(np.float32)
    got = store_e4m3()(x).view(np.uint8)
    np.testing.assert_array_equal(got, expected_codes(x))


def test_boundaries_ties_subnormals_and_specials():
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 3e38, 448.0, -448.0],
                        np.float32)
    x = np.concatenate([boundary_values(), specials]).astype(np.float32)
    got = store_e4m3()(x).view(np.uint8)
    np.testing.assert_array_equal(got, expected_codes(x))
