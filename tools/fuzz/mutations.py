"""Mutations of one argument of a valid call: wrong Python types, dtypes, ranks and extents, strides
(transposed, broadcast, negative), NaN/inf values, empty and huge extents (as stride-0 views, so they
cost no memory). Each mutation is (label, function value -> new value), deterministic."""
import numpy as np


def _broadcast(v, axis, n):
    shape = list(v.shape)
    shape[axis] = n
    strides = list(v.strides)
    strides[axis] = 0
    return np.lib.stride_tricks.as_strided(v, shape, strides)


def _array_mutations(v):
    out = [("None", lambda v: None), ("list", lambda v: v.tolist()), ("float", lambda v: 1.5),
           ("0-d", lambda v: v.reshape(-1)[:1].reshape(())),
           ("extra dim", lambda v: v[None]), ("drop dim", lambda v: v.reshape(-1))]
    for dt in (np.float32, np.float64, np.int32, np.int64, np.uint8):
        if v.dtype != np.dtype(dt):
            out.append((f"dtype {np.dtype(dt).name}", lambda v, dt=dt: v.astype(dt)))
    for axis in range(v.ndim):
        out += [(f"axis {axis} - 1", lambda v, a=axis: np.take(v, np.arange(max(v.shape[a] - 1, 0)), axis=a)),
                (f"axis {axis} + 1", lambda v, a=axis: np.concatenate([v, np.take(v, [0], axis=a)], axis=a)),
                (f"axis {axis} empty", lambda v, a=axis: np.take(v, np.arange(0), axis=a)),
                (f"axis {axis} 2^31+7 (stride 0)", lambda v, a=axis: _broadcast(v, a, 2**31 + 7)),
                (f"axis {axis} reversed", lambda v, a=axis: np.flip(v, axis=a))]
    if v.ndim >= 2:
        out.append(("transposed copy", lambda v: np.ascontiguousarray(v.swapaxes(-1, -2)).swapaxes(-1, -2)))
        out.append(("every other column", lambda v: np.repeat(v, 2, axis=-1)[..., ::2]))
    if v.dtype.kind == "f" or v.dtype.name in ("bfloat16", "float8_e4m3fn"):
        out += [("NaN", lambda v: _with_value(v, np.nan)), ("inf", lambda v: _with_value(v, np.inf))]
    if v.dtype.kind == "i":
        out += [("negative", lambda v: _with_value(v, -5)), ("int max", lambda v: _with_value(v, np.iinfo(v.dtype).max))]
    out.append(("read-only", _read_only))
    return out


def _with_value(v, x):
    w = v.copy()
    if w.size:
        w.reshape(-1)[w.size // 2] = x
    return w


def _read_only(v):
    w = v.copy()
    w.setflags(write=False)
    return w


def _scalar_mutations(v):
    out = [("None", lambda v: None), ("str", lambda v: "7"), ("list", lambda v: [v])]
    if isinstance(v, bool):
        return out + [("int 2", lambda v: 2)]
    if isinstance(v, int):
        return out + [("0", lambda v: 0), ("-1", lambda v: -1), ("2^31", lambda v: 2**31), ("float", lambda v: v + 0.5)]
    if isinstance(v, float):
        return out + [("nan", lambda v: float("nan")), ("inf", lambda v: float("inf")), ("0", lambda v: 0.0),
                      ("negative", lambda v: -v)]
    if isinstance(v, str):
        return out + [("other", lambda v: v[::-1]), ("empty", lambda v: "")]
    return out


def mutations(value):
    if isinstance(value, np.ndarray):
        return _array_mutations(value)
    if isinstance(value, tuple) and value and all(isinstance(x, np.ndarray) for x in value):
        out = [("tuple of 1", lambda v: v[:1]), ("tuple swapped", lambda v: v[::-1])]
        for i, part in enumerate(value):
            for label, fn in _array_mutations(part):
                out.append((f"[{i}] {label}", lambda v, i=i, fn=fn: v[:i] + (fn(v[i]),) + v[i + 1:]))
        return out
    return _scalar_mutations(value)
