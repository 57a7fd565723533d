"""The legacy grouped GEMMs in numpy float32 (see the package docstring for the contracts)."""
import ml_dtypes
import numpy as np

from ..._arrays import to_numpy
from ..._errors import ArgumentTypeError, InvalidArgumentError, invalid_argument

_BF16 = np.dtype(ml_dtypes.bfloat16)


def _array(fn, arg, x, ndim, dtype=None):
    try:
        v = to_numpy(x)
    except TypeError:
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a numpy array or a torch CPU tensor, "
                        f"got {type(x).__name__}") from None
    if v.ndim != ndim:
        raise invalid_argument(fn, arg, f"must be {ndim}-D, got shape {list(v.shape)}")
    if dtype is not None and v.dtype != dtype:
        raise invalid_argument(fn, arg, f"must have dtype {dtype}, got {v.dtype}")
    return v


def _out(fn, d, ndim):
    v = _array(fn, "d", d, ndim)
    if v.dtype not in (_BF16, np.dtype(np.float32)):
        raise invalid_argument(fn, "d", f"must have dtype bfloat16 or float32, got {v.dtype}")
    if not v.flags.writeable:
        raise invalid_argument(fn, "d", "is an output and must be writable")
    return v


def _m_grouped(fn, a, b_nk, d, m_indices, rows=None):
    """d[m] = a_row(m) @ b_nk[g(m)]^T, float32 accumulation; g(m) = -1 writes a zero row."""
    av = _array(fn, "a", a, 2, _BF16)
    bv = _array(fn, "b", b_nk, 3, _BF16)
    dv = _out(fn, d, 2)
    idx = _array(fn, "m_indices", m_indices, 1, np.dtype(np.int32))
    m = dv.shape[0]
    if idx.shape[0] != m or bv.shape[1] != dv.shape[1] or bv.shape[2] != av.shape[1]:
        raise InvalidArgumentError(f"{fn}: shapes disagree: a {list(av.shape)}, b (as [G, N, K]) {list(bv.shape)}, "
                                   f"d {list(dv.shape)}, m_indices {list(idx.shape)}")
    if rows is None:
        if av.shape[0] != m:
            raise invalid_argument(fn, "a", f"must have {m} rows (d's), got {av.shape[0]}")
        a_rows = av.astype(np.float32)
    else:
        r = _array(fn, "m_row_indices", rows, 1, np.dtype(np.int32))
        if r.shape[0] != m:
            raise invalid_argument(fn, "m_row_indices", f"must have {m} entries (d's rows), got {r.shape[0]}")
        if (r >= av.shape[0]).any():
            raise invalid_argument(fn, "m_row_indices", f"must be < {av.shape[0]} (a's rows)")
        a_rows = np.where((r >= 0)[:, None], av[np.maximum(r, 0)].astype(np.float32), np.float32(0))
    if (idx >= bv.shape[0]).any() or (idx < -1).any():
        raise invalid_argument(fn, "m_indices", f"must be in [-1, {bv.shape[0]})")
    out = np.zeros(dv.shape, np.float32)
    for g in np.unique(idx[idx >= 0]):
        sel = idx == g
        out[sel] = a_rows[sel] @ bv[g].astype(np.float32).T
    dv[...] = out.astype(dv.dtype)


def m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, m_indices) -> None:
    _m_grouped("m_grouped_bf16_gemm_nt_contiguous_tl", a, b, d, m_indices)


def m_grouped_bf16_gemm_nn_contiguous_tl(a, b, d, m_indices) -> None:
    _m_grouped("m_grouped_bf16_gemm_nn_contiguous_tl", a, _transposed(b), d, m_indices)


def a_fused_m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, handle) -> None:
    fn = "a_fused_m_grouped_bf16_gemm_nt_contiguous_tl"
    m_indices, rows = _handle(fn, handle, 2, "(m_indices, m_row_indices)")
    _m_grouped(fn, a, b, d, m_indices, rows)


def a_fused_m_grouped_bf16_gemm_nn_contiguous_tl(a, b, d, handle) -> None:
    fn = "a_fused_m_grouped_bf16_gemm_nn_contiguous_tl"
    m_indices, rows = _handle(fn, handle, 2, "(m_indices, m_row_indices)")
    _m_grouped(fn, a, _transposed(b), d, m_indices, rows)


def _transposed(b):
    """[G, K, N] -> a [G, N, K] view (torch or numpy)."""
    return b.mT if hasattr(b, "mT") else np.swapaxes(b, -1, -2)


def _handle(fn, handle, n, what):
    if not isinstance(handle, (tuple, list)) or len(handle) != n:
        raise ArgumentTypeError(f"{fn}: argument 'handle' must be a tuple {what}")
    return handle


def _k_grouped(fn, a, b, d, handle, acc, fused):
    k_indices, k_start, k_end = _handle(fn, handle, 3, "(k_indices, k_start, k_end)")
    av = _array(fn, "a", a, 2, _BF16)
    bv = _array(fn, "b", b, 2, _BF16)
    dv = _out(fn, d, 3)
    ki = _array(fn, "k_indices", k_indices, 1, np.dtype(np.int32))
    ks = _array(fn, "k_start", k_start, 1, np.dtype(np.int32))
    ke = _array(fn, "k_end", k_end, 1, np.dtype(np.int32))
    groups, m, n = dv.shape
    if ks.shape[0] != groups or ke.shape[0] != groups:
        raise invalid_argument(fn, "handle", f"k_start and k_end must have {groups} entries (d's groups)")
    if av.shape[1] != m or bv.shape[1] != n:
        raise InvalidArgumentError(f"{fn}: shapes disagree: a {list(av.shape)} ([K, M]), b {list(bv.shape)} "
                                   f"([K, N]), d {list(dv.shape)} ([G, M, N])")
    direct, gathered = (bv, av) if fused == "a" else (av, bv)
    if ki.shape[0] != direct.shape[0]:
        raise invalid_argument(fn, "k_indices", f"must have {direct.shape[0]} entries (the unfused operand's rows)")
    if (ki >= gathered.shape[0]).any():
        raise invalid_argument(fn, "k_indices", f"must be < {gathered.shape[0]} (the fused operand's rows)")
    for g in range(groups):
        lo, hi = int(ks[g]), int(ke[g])
        if lo >= hi:
            if not acc:
                dv[g] = 0
            continue
        if lo < 0 or hi > direct.shape[0]:
            raise invalid_argument(fn, "handle", f"group {g} range [{lo}, {hi}) is outside [0, {direct.shape[0]})")
        rows = ki[lo:hi]
        keep = rows >= 0
        near = direct[lo:hi][keep].astype(np.float32)
        far = gathered[rows[keep]].astype(np.float32)
        a_part, b_part = (far, near) if fused == "a" else (near, far)
        prod = a_part.T @ b_part
        if acc:
            prod += dv[g].astype(np.float32)
        dv[g] = prod.astype(dv.dtype)


def a_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a, b, d, handle, acc) -> None:
    _k_grouped("a_fused_k_grouped_bf16_gemm_tn_contiguous_tl", a, b, d, handle, bool(acc), "a")


def b_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a, b, d, handle, acc) -> None:
    _k_grouped("b_fused_k_grouped_bf16_gemm_tn_contiguous_tl", a, b, d, handle, bool(acc), "b")
