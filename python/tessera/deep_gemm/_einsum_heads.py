"""einsum's per-head expressions 'bhr,hdr->bhd' and 'bhd,hdr->bhr' (bfloat16 in, bfloat16/float32 out).

Summation order: every output element is the sum over the contracted dimension of exact bf16 x bf16
products, accumulated in float64 (BLAS dgemm) and rounded once to d's dtype. Products of two bf16
values are exact, and a float64 sum of them is exact to far below bf16/fp32 resolution, so the result
is the correctly rounded value of the exact sum, independent of blocking and thread count. A GPU (or
torch's CPU kernel) accumulating in float32 along a single K chain differs from it only by its own
float32 rounding: calc_diff against such a reference is ~3e-11 on DeepGEMM's shapes (its bound:
1e-10), where a second float32 order would add its own ~2e-10.
"""
import ml_dtypes
import numpy as np

from .._arrays import shares_own_memory, to_numpy
from .._errors import ArgumentTypeError, InvalidArgumentError, invalid_argument

_BF16 = np.dtype(ml_dtypes.bfloat16)
_CHUNK_BYTES = 256 << 20  # float64 working set per block of heads


def _view(fn, arg, x, dtypes, writable=False):
    try:
        v = to_numpy(x)
    except TypeError:
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a numpy array or a torch CPU tensor, "
                        f"got {type(x).__name__}") from None
    if v.ndim != 3:
        raise invalid_argument(fn, arg, f"must be 3-D, got shape {list(v.shape)}")
    if v.dtype not in dtypes:
        names = " or ".join(str(d) for d in dtypes)
        raise invalid_argument(fn, arg, f"must have dtype {names}, got {v.dtype}")
    if v.shape[2] > 1 and v.strides[2] != v.itemsize:
        raise invalid_argument(fn, arg, f"must have a contiguous last dimension (stride 1), got element strides "
                               f"{[s // v.itemsize for s in v.strides]}")
    if writable and not v.flags.writeable:
        raise invalid_argument(fn, arg, "is an output and must be writable")
    if writable and shares_own_memory(v):
        raise invalid_argument(fn, arg, f"is an output whose elements share memory (shape {list(v.shape)}, "
                               f"strides {list(v.strides)}); pass a view without repeated or interleaved elements")
    return v


def head_einsum(expr: str, a, b, d) -> None:
    """d = einsum(expr, a, b) for the two per-head expressions, in float64 (see the module docstring)."""
    fn = "einsum"
    x = _view(fn, "a", a, (_BF16,))
    y = _view(fn, "b", b, (_BF16,))
    z = _view(fn, "d", d, (_BF16, np.dtype(np.float32)), writable=True)
    bsz, heads = x.shape[0], x.shape[1]
    if y.shape[0] != heads:
        raise invalid_argument(fn, "b", f"must have {heads} heads (a.shape[1]) in dimension 0, got shape {list(y.shape)}")
    if expr == "bhr,hdr->bhd":
        r, dd = x.shape[2], y.shape[1]
        if y.shape[2] != r:
            raise invalid_argument(fn, "b", f"must have shape [{heads}, D, {r}], got {list(y.shape)}")
        want = (bsz, heads, dd)
    else:
        dd, r = x.shape[2], y.shape[2]
        if y.shape[1] != dd:
            raise invalid_argument(fn, "b", f"must have shape [{heads}, {dd}, R], got {list(y.shape)}")
        want = (bsz, heads, r)
    if tuple(z.shape) != want:
        raise invalid_argument(fn, "d", f"must have shape {list(want)}, got {list(z.shape)}")
    if z.size == 0:
        return
    if np.shares_memory(z, x) or np.shares_memory(z, y):
        raise InvalidArgumentError(f"{fn}: argument 'd' must not overlap 'a' or 'b'")
    per_head = 8 * (x[:, 0].size + y[0].size + z[:, 0].size)
    step = max(1, _CHUNK_BYTES // max(per_head, 1))
    for h0 in range(0, heads, step):
        hs = slice(h0, min(heads, h0 + step))
        xh = np.moveaxis(x[:, hs], 1, 0).astype(np.float64)  # [h, b, k]
        yh = y[hs].astype(np.float64)
        out = xh @ (np.swapaxes(yh, 1, 2) if expr == "bhr,hdr->bhd" else yh)  # [h, b, n]
        z[:, hs] = np.moveaxis(out, 0, 1).astype(z.dtype)
