"""Thread-role branches: ``if T.get_thread_binding() < 32: A else: B``.

A CPU block is one thread that does the work of all of the block's GPU threads. A branch on the
thread index that splits the threads into roles (warp specialisation: some threads do A, the others
B) therefore becomes "the block does A, then B": each side is traced once if at least one thread of
the block takes it (decided now, from the T.Kernel's ``threads=``). This is exact when each side is
block-level code (tile ops, T.Parallel loops, stores that do not depend on the thread). Any other use
of the thread index (arithmetic, indexing, T.if_then_else) needs per-thread execution: it raises
NotImplementedInTessera naming T.get_thread_binding, and @T.prim_func then traces the kernel again
as a per-thread kernel (_simt.py).
"""
from . import _context as ctx
from ._expr import Expr

_PER_THREAD = ("T.get_thread_binding: the thread index is only supported in the condition of an `if` that "
               "splits the block's threads into roles (e.g. `if T.get_thread_binding() < 32:`); a CPU block is "
               "one thread, so per-thread values (arithmetic, indexing, T.if_then_else on it) do not exist")


class _ThreadValue(Expr):
    """A value that exists per GPU thread; only thread-role conditions are built from it."""

    per_thread = True

    def __init__(self):
        super().__init__(None)

    @property
    def node(self):
        raise ctx.not_implemented(_PER_THREAD)

    @property
    def dtype(self):
        return "int32"

    def __bool__(self):
        raise ctx.not_implemented(_PER_THREAD)


class ThreadIndex(_ThreadValue):
    """``T.get_thread_binding(dim)`` inside a T.Kernel with ``threads=``."""

    def __init__(self, dim, extents):
        super().__init__()
        self.dim, self.extents = dim, extents

    def _cmp(self, pred):
        n = self.extents[self.dim] if self.dim < len(self.extents) else 1
        return ThreadCondition(frozenset(t for t in range(n) if pred(t)), n)

    def __lt__(self, o): return self._cmp(lambda t: t < int(o))
    def __le__(self, o): return self._cmp(lambda t: t <= int(o))
    def __gt__(self, o): return self._cmp(lambda t: t > int(o))
    def __ge__(self, o): return self._cmp(lambda t: t >= int(o))
    def __eq__(self, o): return self._cmp(lambda t: t == int(o))  # noqa: PLE0307
    def __ne__(self, o): return self._cmp(lambda t: t != int(o))
    __hash__ = object.__hash__


class ThreadCondition(_ThreadValue):
    """The set of thread indices (of one dimension) for which a condition holds."""

    def __init__(self, threads, n):
        super().__init__()
        self.threads, self.n = threads, n

    def __and__(self, o):
        return ThreadCondition(self.threads & _threads_of(o, self.n), self.n)

    def __or__(self, o):
        return ThreadCondition(self.threads | _threads_of(o, self.n), self.n)

    def __invert__(self):
        return ThreadCondition(frozenset(range(self.n)) - self.threads, self.n)

    __rand__, __ror__ = __and__, __or__

    def some_take(self, branch):
        """Whether at least one thread takes the then (branch=True) or the else side."""
        return bool(self.threads) if branch else len(self.threads) < self.n


def _threads_of(o, n):
    if isinstance(o, ThreadCondition) and o.n == n:
        return o.threads
    raise ctx.not_implemented(_PER_THREAD)


def get_thread_binding(dim=0):
    """The GPU thread index along ``dim`` of the enclosing T.Kernel; see the module docstring."""
    t = ctx.current("T.get_thread_binding")
    extents = getattr(t, "kernel_threads", None)
    if not extents or t.kernel_depth == 0:
        raise ctx.error("T.get_thread_binding() must be used inside a T.Kernel")
    if t.simt_mode:
        from ._simt import SimtState

        if t.simt is None:
            t.simt = SimtState(extents, t.simt_plan)
        return t.simt.thread_index(t, dim)
    return ThreadIndex(int(dim), extents)


_THREAD_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


def thread_binding(begin, end=None, thread="threadIdx.x", **_ignored):
    """``T.thread_binding(0, n, thread="threadIdx.x")``: TVM's spelling of T.get_thread_binding(0),
    for the whole extent n of that T.Kernel thread dimension."""
    t = ctx.current("T.thread_binding")
    if thread not in _THREAD_AXES:
        raise ctx.not_implemented(f"T.thread_binding(thread={thread!r}): only threadIdx.x / .y / .z are supported")
    dim = _THREAD_AXES[thread]
    begin, end = (0, begin) if end is None else (begin, end)
    extents = getattr(t, "kernel_threads", None) or ()
    extent = extents[dim] if dim < len(extents) else 1
    if begin != 0 or end != extent:
        raise ctx.not_implemented(f"T.thread_binding({begin}, {end}, thread={thread!r}): only the whole extent of the "
                                  f"T.Kernel's thread dimension (0 .. {extent}) is supported")
    return get_thread_binding(dim)


def get_warp_idx(warp_size=32, block_dim=None):
    """The warp of the calling thread (thread index // 32): a per-thread value, so the kernel is a
    per-thread kernel (_simt.py)."""
    return _per_thread_index("T.get_warp_idx") // int(warp_size)


def get_lane_idx(warp_size=32, block_dim=None):
    """The lane of the calling thread in its warp (thread index % 32); see get_warp_idx."""
    return _per_thread_index("T.get_lane_idx") % int(warp_size)


def get_warp_group_idx(warp_size=32, warps_per_group=4, block_dim=None):
    """The warp group of the calling thread (thread index // 128); see get_warp_idx."""
    return _per_thread_index("T.get_warp_group_idx") // (int(warp_size) * int(warps_per_group))


get_warp_idx_sync = get_warp_idx


def _per_thread_index(what):
    t = ctx.current(what)
    if not t.simt_mode:
        raise ctx.not_implemented(f"{_PER_THREAD} ({what})")
    return get_thread_binding(0) if len(getattr(t, "kernel_threads", ())) <= 1 else _linear_thread_index(t)


def _linear_thread_index(t):
    index, stride = 0, 1
    for d, e in enumerate(t.kernel_threads):
        index = index + get_thread_binding(d) * stride
        stride *= e
    return index


class KernelReturn(Exception):
    """Raised by T.thread_return() where it ends the rest of the block's code; T.Kernel stops there."""


def thread_return():
    """Ends the kernel for the calling threads. Supported where that is the rest of the block's code
    for every thread it applies to: at the T.Kernel body's top level (or the per-thread loop's level),
    including inside Python-level ifs and @T.macro bodies, and as the last statement of an `if` placed
    directly in the T.Kernel body (the rewriter turns the statements after that `if` into its else), and
    anywhere in a branch (outside loops and nested ifs) of the T.Kernel body's last `if` statement."""
    t = ctx.current("T.thread_return")
    level = (t.loop_depth, t.if_depth)
    if t.simt is not None and t.simt.depth is not None:
        ok = t.simt.at_loop_level(t) and not t.simt.outer
    else:
        # also: directly in a branch of the kernel body's last `if` (the rest of that branch is skipped)
        ok = level == (0, 0) or (level == (0, 1) and getattr(t, "last_statement", False))
    if not ok:
        raise ctx.not_implemented("T.thread_return() inside a loop or an if (other than the last statement of an if "
                                  "directly in the T.Kernel body, or a branch of the body's last if) is not supported: "
                                  "tessera has no early exit from the middle of a block's code")
    raise KernelReturn()


def is_thread_role(cond):
    return isinstance(cond, ThreadCondition)
