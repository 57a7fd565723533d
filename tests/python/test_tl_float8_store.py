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


@tessera.jit(out_idx=[-1])
def store_scaled_e4m3(scale):
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float8_e4m3")):
        with T.Kernel(T.ceildiv(n, 256), threads=128) as b:
            for i in T.Parallel(256):
                # written out three times (a Python variable would become one let-bound vector)
                y[b * 256 + i] = T.if_then_else(T.isnan(x[b * 256 + i] * scale), T.abs(x[b * 256 + i] * scale),
                                                T.clamp(x[b * 256 + i] * scale, -448.0, 448.0))
    return main


def mask_arguments(src, load):
    """The text of every `load(...)` call in src (balanced parentheses)."""
    calls, start = [], src.find(load + "(")
    while start >= 0:
        depth, end = 0, start + len(load)
        for end in range(start + len(load), len(src)):
            depth += {"(": 1, ")": -1}.get(src[end], 0)
            if depth == 0:
                break
        calls.append(src[start:end + 1])
        start = src.find(load + "(", end)
    return calls


def test_select_sides_reuse_the_condition_load(rng):
    """The FP8 casts' NaN-preserving clamp: the sides read x where the condition did (the same load, so
    no per-side masked loads), and the codes match the scaled values' with NaN made positive."""
    kernel = store_scaled_e4m3(0.75)
    x = (rng.standard_normal(1000) * 600).astype(np.float32)
    x[[3, 500, 999]] = [np.nan, -np.nan, np.inf]
    got = kernel(x).view(np.uint8)
    v = np.float32(0.75) * x
    want = expected_codes(np.where(np.isnan(v), np.abs(v), np.clip(v, -448, 448)).astype(np.float32))
    np.testing.assert_array_equal(got, want)
    masked = mask_arguments(kernel.get_kernel_source(), "tlrt::ld_f32_m")
    assert not [m for m in masked if "visnan" in m], masked
