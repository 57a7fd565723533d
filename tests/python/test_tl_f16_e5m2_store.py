"""Stores of float32 values into float16 and float8 e5m2 tensors (the vector runtime's enc_f16 and
enc_e5m2, lane arithmetic) against numpy's and ml_dtypes' conversions, bit for bit: every rounding
boundary of each format and the float32 neighbours around it, both signs, subnormal codes and float32
subnormals, overflow to infinity, infinities and NaN; odd lengths so the masked tail runs too."""
import ml_dtypes
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T

E5M2 = np.dtype(ml_dtypes.float8_e5m2)


@tessera.jit(out_idx=[-1])
def store(dtype):
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 256), threads=128) as b:
            for i in T.Parallel(256):
                y[b * 256 + i] = x[b * 256 + i]
    return main


def expected_f16(x):
    with np.errstate(over="ignore"):  # values past float16's range become infinity, as stores must
        return x.astype(np.float16).view(np.uint16)


def expected_e5m2(x):
    """ml_dtypes' codes; NaN gives sign | 0x7E (tessera's scalar rule)."""
    codes = x.astype(E5M2).view(np.uint8).copy()
    nan = np.isnan(x)
    codes[nan] = (np.signbit(x[nan]).astype(np.uint8) << 7) | 0x7E
    return codes


def boundary_values(table):
    """Every finite value of a format, every midpoint between neighbours (ties), and the float32 values
    one ulp around each, both signs."""
    values = table.astype(np.float32)
    finite = np.unique(np.abs(values[np.isfinite(values)]))
    top = np.float64(finite[-1])
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    # the overflow tie (top + half an ulp of top rounds to infinity) and a value past it
    ulp = top - np.float64(finite[-2])
    points = np.concatenate([finite, mids, [top + ulp / 2, top + ulp]]).astype(np.float32)
    around = np.concatenate([points, np.nextafter(points, np.float32(np.inf)), np.nextafter(points, np.float32(0))])
    return np.concatenate([around, -around])


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 3e38, -3e38], np.float32)
CASES = {
    "float16": (expected_f16, np.arange(1 << 16, dtype=np.uint16).view(np.float16)),
    "float8_e5m2": (expected_e5m2, np.arange(256, dtype=np.uint8).view(E5M2)),
}


@pytest.mark.parametrize("dtype", sorted(CASES))
def test_boundaries_ties_subnormals_and_specials(dtype):
    expected, table = CASES[dtype]
    x = np.concatenate([boundary_values(table), SPECIALS]).astype(np.float32)
    got = store(dtype)(x)
    np.testing.assert_array_equal(got.view(np.uint16 if dtype == "float16" else np.uint8), expected(x))


@pytest.mark.parametrize("dtype", sorted(CASES))
@pytest.mark.parametrize("n", [1, 255, 1000])
def test_random_values_of_every_magnitude(rng, dtype, n):
    expected, _ = CASES[dtype]
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, size=n))).astype(np.float32)
    got = store(dtype)(x)
    np.testing.assert_array_equal(got.view(np.uint16 if dtype == "float16" else np.uint8), expected(x))
