"""Per-thread storage that lives across barriers in a per-thread (SIMT) kernel.

The block's GPU threads run as loops over thread ids split at barriers (_simt.py), so a register of
one thread cannot be a single C variable once a barrier lies between its store and its load. Such
storage gets one copy per thread: a ``T.alloc_local((n,))`` becomes an ``[n, threads]`` array whose
last index is the thread loop's variable wherever it is used (consecutive threads, which share a
vector, use consecutive elements), and a per-thread value bound before a barrier and used after it is
stored into a ``[1, threads]`` array where it is bound. The plan of the
kernel (_simt.Plan) names which storage and values need this.
"""
from .. import _C
from . import _context as ctx
from ._expr import Buffer, BufferRef, Expr, as_node


def _thread_var(what):
    s = ctx.current(what).simt
    if s is None or s.var is None:
        return None
    return s.var


class ThreadLocalBuffer(Buffer):
    """Local storage kept per thread: indexed like the buffer the kernel allocated (``shape``), stored
    as ``[*shape, threads]``."""

    def __init__(self, handle, shape, threads):
        super().__init__(handle)
        self.shape, self.ndim, self.threads = tuple(shape), len(shape), threads

    def __getitem__(self, idx):
        return ThreadLocalRef(self, self._indices(idx))

    def __setitem__(self, idx, value):
        indices = self._indices(idx)
        if any(isinstance(i, slice) for i in indices):
            raise ctx.error(f"assigning to a slice of '{self.name}' is not supported; use T.fill or a T.Parallel loop")
        t = ctx.current("storing to a buffer")
        if _thread_var(self.name) is None:
            # block-level code before the thread loop (T.alloc_var(init=...)): every thread's copy
            mins = [as_node(i) for i in indices] + [as_node(0)]
            extents = [as_node(1) for _ in indices] + [as_node(self.threads)]
            v = as_node(value)
            ctx.set_loc()
            t.builder.fill(_C.tl_region(self.handle, mins, extents), v)
            return
        nodes = [as_node(i) for i in indices] + [self.thread_node("storing to")]
        v = as_node(value)
        ctx.set_loc()
        t.builder.store(self.handle, nodes, v)

    def thread_node(self, what):
        var = _thread_var(f"'{self.name}'")
        if var is None:
            raise ctx.not_implemented(f"{what} one element of '{self.name}' (per-thread storage) outside the "
                                      f"per-thread code of the block")
        return var

    def region(self):
        """The calling thread's copy; outside per-thread code (block-level code before the first
        T.get_thread_binding()), every thread's copy."""
        var = _thread_var(f"'{self.name}'")
        first = (Expr(var), 1) if var is not None else (0, self.threads)
        mins = [as_node(0) for _ in self.shape] + [as_node(first[0])]
        extents = [as_node(d) for d in self.shape] + [as_node(first[1])]
        ctx.set_loc()
        return _C.tl_region(self.handle, mins, extents)

    def _check_simt(self):
        pass  # kept per thread: valid on both sides of a barrier


class ThreadLocalRef(BufferRef):
    """An element or a slice of per-thread storage (ThreadLocalBuffer)."""

    @property
    def node(self):
        if any(isinstance(i, slice) for i in self.indices):
            raise ctx.error(f"a slice of '{self.buffer.name}' is a tile, not a value; index single elements")
        nodes = [as_node(i) for i in self.indices] + [self.buffer.thread_node("loading")]
        ctx.set_loc()
        return _C.tl_load(self.buffer.handle, nodes)

    def region(self):
        mins, extents, _ = self.region_bounds()
        ctx.set_loc()
        return _C.tl_region(self.buffer.handle, mins + [self.buffer.thread_node("a tile of")],
                            extents + [as_node(1)])


def threads_of(t):
    n = 1
    for e in getattr(t, "kernel_threads", (1,)):
        n *= e
    return n


def alloc_per_thread(t, name, shape, dtype):
    """A ThreadLocalBuffer of the T.Kernel being traced (allocations are hoisted to the kernel)."""
    threads = threads_of(t)
    ctx.set_loc()
    handle = t.builder.alloc(name, list(shape) + [threads], dtype, "local")
    t.local_names.add(handle.name)
    return ThreadLocalBuffer(handle, shape, threads)


def spill(t, name, node):
    """A per-thread value that lives across a barrier: stored into a [1, threads] array here, loaded
    wherever it is used."""
    buf = alloc_per_thread(t, f"{name}_per_thread", (1,), node.dtype)
    buf[0] = Expr(node)
    return buf[0]
