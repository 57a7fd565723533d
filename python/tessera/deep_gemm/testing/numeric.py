"""Numeric checks used by DeepGEMM-style tests, for numpy arrays and torch CPU tensors."""
import numpy as np

from ..._arrays import is_torch_tensor, to_numpy


def _float64(x) -> np.ndarray:
    if is_torch_tensor(x):
        return x.detach().double().numpy()
    return np.asarray(to_numpy(x), dtype=np.float64)


def calc_diff(x, y) -> float:
    """1 - 2*sum(x*y) / sum(x^2 + y^2) in float64: 0 for identical inputs, scale-free otherwise
    (DeepGEMM's thresholds: BF16 GEMM < 1e-5, FP8 x FP8 < 1e-3)."""
    x, y = _float64(x), _float64(y)
    denominator = (x * x + y * y).sum()
    if denominator == 0:  # both all zero: identical
        return 0.0
    return float(1.0 - 2.0 * (x * y).sum() / denominator)


def count_bytes(*tensors) -> int:
    """Total bytes of the arrays given (nested tuples/lists are walked, None is skipped)."""
    total = 0
    for t in tensors:
        if isinstance(t, (tuple, list)):
            total += count_bytes(*t)
        elif t is not None:
            total += t.numel() * t.element_size() if is_torch_tensor(t) else np.asarray(t).nbytes
    return total


def _raw_bytes(x) -> np.ndarray:
    """The elements' bit patterns as unsigned ints of the element's width."""
    v = np.ascontiguousarray(to_numpy(x))
    return v.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[v.dtype.itemsize])


def assert_bitwise_equal(x, y, label: str = "") -> None:
    """Raises AssertionError unless x and y have the same shape, element width and bits; the message
    starts with ``label`` (when given) and gives the number of mismatches and the first mismatching
    coordinate with both values."""
    prefix = f"bitwise mismatch ({label}): " if label else "bitwise mismatch: "
    a, b = _raw_bytes(x), _raw_bytes(y)
    assert a.shape == b.shape, f"{prefix}shapes differ: {list(a.shape)} vs {list(b.shape)}"
    assert a.dtype == b.dtype, f"{prefix}element widths differ: {a.dtype.itemsize} vs {b.dtype.itemsize} bytes"
    mismatch = a != b
    if mismatch.any():
        first = tuple(int(i) for i in np.argwhere(mismatch)[0])
        xv, yv = to_numpy(x)[first], to_numpy(y)[first]
        raise AssertionError(f"{prefix}{int(mismatch.sum())} of {a.size} elements differ; first at {first}: "
                             f"{xv!r} (0x{int(a[first]):x}) vs {yv!r} (0x{int(b[first]):x})")
