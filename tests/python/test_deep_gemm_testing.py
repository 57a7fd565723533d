"""tessera.deep_gemm.testing: calc_diff, count_bytes, assert_bitwise_equal, bench, bench_kineto."""
import time

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


def test_bench_kineto_times_the_whole_call_as_the_named_kernel():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.002)

    t = testing.bench_kineto(fn, "fp8_gemm", num_tests=4, flush_l2=False)
    assert len(calls) == 5  # one untimed call, then the timed ones
    assert isinstance(t, float) and 0.0019 < t < 0.5
    (t1,) = testing.bench_kineto(fn, ("fp8_gemm",), num_tests=2, flush_l2=True, suppress_kineto_output=True)
    assert 0.0019 < t1 < 0.5


def test_bench_kineto_names_trace_and_barrier(tmp_path):
    import json

    calls, barriers = [], []
    times = testing.bench_kineto(lambda: calls.append(1), ("dispatch", "combine"), num_tests=3, flush_l2=False,
                                 trace_path=tmp_path / "t.json", barrier=lambda: barriers.append(len(calls)))
    assert len(times) == 2 and times[0] >= 0 and times[1] == 0.0  # the whole call goes to the first name
    assert barriers == [1, 2, 3]  # before every timed call, after the untimed first one
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [e["name"] for e in events] == ["dispatch"] * 3 and all(e["dur"] >= 0 for e in events)


def test_bench_kineto_rejects_bad_arguments():
    from tessera import InvalidArgumentError

    calls = []
    with pytest.raises(InvalidArgumentError, match="argument 'kernel_names' must be a string"):
        testing.bench_kineto(lambda: calls.append(1), 3)
    with pytest.raises(InvalidArgumentError, match="non-empty tuple of strings"):
        testing.bench_kineto(lambda: calls.append(1), ())
    with pytest.raises(InvalidArgumentError, match="argument 'num_tests' must be >= 1"):
        testing.bench_kineto(lambda: calls.append(1), "gemm", num_tests=0)
    with pytest.raises(TypeError, match="argument 'barrier' must be callable"):
        testing.bench_kineto(lambda: calls.append(1), "gemm", barrier=3)
    with pytest.raises(TypeError, match="argument 'trace_path' must be a path"):
        testing.bench_kineto(lambda: calls.append(1), "gemm", trace_path=3)
    assert calls == []  # nothing ran
