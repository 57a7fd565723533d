"""Shared helpers for the Python tests: operand storage in every layout, references, poisoning."""
import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)

# Layout letter pairs: how A and B are *given* to <fn>_{layout} (DeepGEMM's API, docs/gemm.md).
LAYOUTS = ("nt", "nn", "tn", "tt")


def store(values: np.ndarray, dtype, major: str = "row", pad: int = 0) -> np.ndarray:
    """A 2-D array equal to ``values`` (cast to dtype), stored with stride(-1) == 1 ("row") or
    stride(-2) == 1 ("col"), inside a larger buffer when pad > 0 (so the leading stride is not the
    logical width)."""
    r, c = values.shape
    if major == "row":
        buf = np.zeros((r, c + pad), dtype=dtype)
        buf[:, :c] = values.astype(dtype)
        return buf[:, :c]
    buf = np.zeros((c, r + pad), dtype=dtype)
    buf[:, :r] = values.T.astype(dtype)
    return buf[:, :r].T


def given(mat_rows_k: np.ndarray, letter: str, is_a: bool) -> np.ndarray:
    """The logical view of an operand as the layout letter asks: A 'n' = [M, K], 't' = [K, M];
    B 't' = [N, K], 'n' = [K, N]. Input is [rows, K]."""
    rows_first = (letter == "n") if is_a else (letter == "t")
    return mat_rows_k if rows_first else mat_rows_k.T


def f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def poisoned(shape, dtype, value=-7.25) -> np.ndarray:
    """An output array filled with a value no GEMM here produces, to see what was written."""
    return np.full(shape, value, dtype=np.float32).astype(dtype)


def bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])
