"""One bench row: our call and its peers on rotating operand copies, the bytes it moves and its check."""
import dataclasses
from typing import Callable, Dict

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


@dataclasses.dataclass
class Case:
    op: str
    m: int
    n: int
    k: int
    moved_bytes: int                 # bytes read + written by one call (the help's formula per op)
    copies: int                      # operand copies the timed calls rotate through
    ours: Callable                   # ours(i): the tessera call on copy i
    peers: Dict[str, Callable]       # name -> the same computation on copy i ("numpy", "torch", ...)
    check: Callable                  # check(result) -> worst error / tolerance of a result of copy 0


class _Arena:
    """One byte buffer that every row's operand copies are carved from, reset between rows: the pages
    are faulted in once per run instead of once per row (about 2 GB a row, 4x L3 on the host)."""

    def __init__(self):
        self.buf, self.used = np.empty(0, np.uint8), 0

    def take(self, nbytes: int) -> np.ndarray:
        start = (self.used + 63) // 64 * 64
        if start + nbytes > self.buf.size:  # views of the old buffer keep it alive until the row ends
            self.buf, start = np.empty(max(2 * self.buf.size, start + nbytes), np.uint8), 0
        self.used = start + nbytes
        return self.buf[start:start + nbytes]


ARENA = _Arena()


def reserve_arena(nbytes: int):
    """Sizes the arena for the run's largest rotation and faults its pages in once."""
    ARENA.buf, ARENA.used = np.empty(nbytes, np.uint8), 0
    ARENA.buf[::4096] = 0  # one write per page


def next_row():
    """The next row's copies may reuse the arena (the previous row's case is gone)."""
    ARENA.used = 0


def rotated(first: np.ndarray, copies: int):
    """``copies`` arrays holding first's values at different addresses (the copy count keeps the
    rotation's operands beyond the cache); all but the first live in the arena."""
    out = [first]
    for _ in range(copies - 1):
        a = ARENA.take(first.nbytes).view(first.dtype).reshape(first.shape)
        np.copyto(a, first)
        out.append(a)
    return out


def as_torch(torch, a: np.ndarray):
    """A torch view of a numpy array (bf16 / e4m3 through their bit patterns)."""
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if a.dtype == E4M3:
        return torch.from_numpy(a.view(np.uint8)).view(torch.float8_e4m3fn)
    return torch.from_numpy(a)


def as_numpy(a) -> np.ndarray:
    """A numpy array of a result (torch tensors by their bit patterns; numpy arrays unchanged)."""
    if isinstance(a, np.ndarray):
        return a
    name = str(a.dtype)
    if name == "torch.bfloat16":
        return a.view(__import__("torch").int16).numpy().view(BF16)
    if name == "torch.float8_e4m3fn":
        return a.view(__import__("torch").uint8).numpy().view(E4M3)
    return a.numpy()


def ratio(err: np.ndarray, tol: np.ndarray) -> float:
    """The worst error over its tolerance (<= 1 passes; NaN anywhere fails)."""
    if err.size == 0:
        return 0.0
    r = err / tol
    return float("inf") if np.isnan(r).any() else float(r.max())


def sample_rows(rows: int, count: int = 48, seed: int = 5) -> np.ndarray:
    """Rows the checks compare (a float64 reference of a whole DRAM-sized operand would take seconds):
    the first and last rows and random ones between."""
    gen = np.random.default_rng(seed)
    picked = np.concatenate([[0, rows - 1], gen.integers(0, rows, size=max(0, count - 2))])
    return np.unique(picked)
