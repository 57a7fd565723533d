"""TVM's thread all-reduce as TileLang kernels spell it in per-thread (SIMT) code::

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, dtype)]), "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, result[0], tk, dtype="handle"))

Every thread gets, in ``result``, the combination of ``value`` over the threads that differ from it
only along the thread dimensions named (``tk`` = ``T.get_thread_binding(1)``). As the warp
operations (_warp.py) it is an exchange: each thread stores its value into a ``[threads]`` array, the
thread loop is split, and each thread combines its group's values, in the order of a butterfly
(lanes j and j + half, halving) when the group has a power-of-two size, else from the first lane on.
Only one value (count 1), an always-true condition and the combiner of the innermost
``T.attr(..., "reduce_scope", ...)`` are supported.
"""
from . import _context as ctx
from ._expr import BufferRef, Expr, as_node
from ._warp import _exchange, _load, _result

_WHAT = "T.tvm_thread_allreduce"


class CommReducer:
    """``T.comm_reducer(combine, identity)``: the combiner of a thread all-reduce (the identity is not
    needed: every thread of a group contributes a value)."""

    def __init__(self, combine, identity):
        if not callable(combine):
            raise ctx.error(f"T.comm_reducer: combine must be a function of two values, got {combine!r}")
        self.combine, self.identity = combine, identity


def comm_reducer(combine, identity):
    return CommReducer(combine, identity)


class HandleToken:
    """``T.reinterpret(x, dtype="handle")``: an opaque handle, only read as T.attr's value."""


class _Attr:
    def __init__(self, node, key):
        self.node, self.key = node, key

    def __enter__(self):
        t = ctx.current("T.attr")
        t.__dict__.setdefault("reduce_scopes", []).append(self.node)
        return self

    def __exit__(self, *exc):
        ctx.current("T.attr").reduce_scopes.pop()


def attr(node, key, value=None):
    """``with T.attr(T.comm_reducer(...), "reduce_scope", handle):`` around a T.tvm_thread_allreduce;
    other attributes are TVM lowering details with no CPU meaning."""
    if key != "reduce_scope" or not isinstance(node, CommReducer):
        raise ctx.not_implemented(f"T.attr({type(node).__name__}, {key!r}): only T.attr(T.comm_reducer(...), "
                                  f"'reduce_scope', ...) around T.tvm_thread_allreduce is supported")
    return _Attr(node, key)


def evaluate(value=None):
    """``T.evaluate(call)``: the call has run while it was traced; nothing is left to do."""
    return None


def _thread_dim(var):
    dim = getattr(var, "dim", None)
    if getattr(var, "state", None) is None or dim is None:
        raise ctx.not_implemented(f"{_WHAT}: the reduced threads must be named by T.get_thread_binding(dim) values, "
                                  f"got {var!r}")
    return int(dim)


def tvm_thread_allreduce(count, value, cond, result, *threads, dtype=None):
    t = ctx.current(_WHAT)
    scopes = getattr(t, "reduce_scopes", None)
    if not scopes:
        raise ctx.not_implemented(f"{_WHAT} outside `with T.attr(T.comm_reducer(...), 'reduce_scope', ...)`")
    reducer = scopes[-1]
    if _constant(count) != 1:
        raise ctx.not_implemented(f"{_WHAT}: only one value per call (count 1) is supported, got {count!r}")
    if _constant(cond) != 1:
        raise ctx.not_implemented(f"{_WHAT}: only an always-true condition is supported, got {cond!r}")
    if not isinstance(result, BufferRef) or any(isinstance(i, slice) for i in result.indices):
        raise ctx.error(f"{_WHAT}: the result must be an element of a local buffer (e.g. red[0]), got {result!r}")
    if not threads:
        raise ctx.error(f"{_WHAT}: name the reduced threads (T.get_thread_binding values)")
    dims = sorted({_thread_dim(v) for v in threads})
    t, s, buf = _exchange(value, _WHAT)
    extents = list(s.extents) + [1] * (max(dims) + 1 - len(s.extents))
    strides, step = [], 1
    for e in extents:
        strides.append(step)
        step *= e
    tid = Expr(s.var)
    base = tid
    for d in dims:
        base = base - ((tid // strides[d]) % extents[d] if strides[d] > 1 else tid % extents[d]) * strides[d]
    offsets = [0]
    for d in dims:  # lanes in order, the lowest thread dimension fastest
        offsets = [o + j * strides[d] for j in range(extents[d]) for o in offsets]
    lanes = [_load(buf, base + o) for o in offsets]
    if len(lanes) & (len(lanes) - 1) == 0:
        while len(lanes) > 1:
            half = len(lanes) // 2
            lanes = [reducer.combine(lanes[j], lanes[j + half]) for j in range(half)]
        total = lanes[0]
    else:
        total = lanes[0]
        for lane in lanes[1:]:
            total = reducer.combine(total, lane)
    result.buffer[tuple(result.indices)] = _result(t, s, as_node(total), _WHAT)
    return None


def _constant(x):
    """x as a Python int when it is a constant (True is 1), else None."""
    if isinstance(x, (bool, int)):
        return int(x)
    return as_node(x).const_int() if isinstance(x, Expr) else None
