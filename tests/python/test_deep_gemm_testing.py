"""tessera.deep_gemm.testing: calc_diff, count_bytes, assert_bitwise_equal, bench."""
import ml_dtypes
import numpy as np
import pytest

from tessera.deep_gemm import testing


def test_calc_diff():
    x = np.array([1.0, 2.0, -3.0], np.float32)
    assert testing.calc_diff(x, x) == pytest.approx(0.0, abs=1e-15)
    assert testing.calc_diff(x, -x) == pytest.approx(2.0)
    y = x.astype(ml_dtypes.bfloat16)
    expected = 1 - 2 * np.sum(x * y.astype(np.float64)) / np.sum(x.astype(np.float64) ** 2 + y.astype(np.float64) ** 2)
    assert testing.calc_diff(x, y) == pytest.approx(expected)


def test_count_bytes_walks_nested_sequences():
    a = np.zeros((4, 8), ml_dtypes.bfloat16)
    b = np.zeros(10, np.float32)
    assert testing.count_bytes(a, (b, None), [a]) == 64 + 40 + 64


def test_assert_bitwise_equal_reports_the_first_mismatch():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    testing.assert_bitwise_equal(x, x.copy())
    y = x.copy()
    y[1, 2] = -0.0 if x[1, 2] == 0 else x[1, 2] + 1
    y[2, 3] += 1
    with pytest.raises(AssertionError, match=r"2 of 12 elements differ; first at \(1, 2\)"):
        testing.assert_bitwise_equal(x, y)
    with pytest.raises(AssertionError, match="shapes differ"):
        testing.assert_bitwise_equal(x, x[:2])
    zero, neg_zero = np.zeros(1, np.float32), -np.zeros(1, np.float32)
    with pytest.raises(AssertionError):
        testing.assert_bitwise_equal(zero, neg_zero)  # equal values, different bits


def test_bench_returns_the_median_time_per_call():
    calls = []
    t = testing.bench(lambda: calls.append(1), num_warmups=2, num_tests=5)
    assert len(calls) == 7
    assert 0 <= t < 0.1
