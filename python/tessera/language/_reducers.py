"""Reducers (T.alloc_reducer): a buffer that the GPU's threads update with partial results and that
T.finalize_reducer combines across threads. A CPU block is one thread that holds the whole block's
fragment, so a reducer is a fragment, updates combine into it directly and finalizing copies it (or
does nothing, for the in-place legacy form)."""
from . import _context as ctx
from ._expr import BufferRef
from ._math import infinity, max_value, min_value
from ._math import max as tl_max
from ._math import min as tl_min
from ._ops import alloc_fragment, copy, fill

_COMBINE = {"sum": lambda a, b: a + b, "max": tl_max, "min": tl_min, "bitand": lambda a, b: a & b,
            "bitor": lambda a, b: a | b, "bitxor": lambda a, b: a ^ b}


def alloc_reducer(shape, dtype, op="sum", replication=None):
    """A reducer of `op` (sum, max, min, bitand, bitor, bitxor): a fragment on the CPU."""
    if op not in _COMBINE:
        raise ctx.error(f"T.alloc_reducer: op must be one of {sorted(_COMBINE)}, got {op!r}")
    buf = alloc_fragment(shape, dtype)
    buf.reducer_op = op
    return buf


def _identity(op, dtype):
    if op == "sum" or op in ("bitor", "bitxor"):
        return 0
    if op == "bitand":
        return -1
    if str(dtype).startswith(("float", "bfloat")):
        return -infinity(dtype) if op == "max" else infinity(dtype)
    return min_value(dtype) if op == "max" else max_value(dtype)


def reducer_init(reducer, value=None):
    """Fills the reducer with value, or with its op's identity."""
    op = getattr(reducer, "reducer_op", "sum")
    fill(reducer, _identity(op, reducer.dtype) if value is None else value)


def reducer_update(element, contribution):
    """reducer[idx] = op(reducer[idx], contribution)."""
    if not isinstance(element, BufferRef):
        raise ctx.error("T.reducer_update: the first argument must be an element of a reducer (acc[i, j])")
    op = getattr(element.buffer, "reducer_op", "sum")
    element.buffer[tuple(element.indices)] = _COMBINE[op](element, contribution)


def finalize_reducer(reducer, dst=None):
    """Combines the threads' partial results: on the CPU the reducer already holds them, so this
    copies it to dst (when given)."""
    if dst is not None:
        copy(reducer, dst)
