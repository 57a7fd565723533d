"""Per-thread (SIMT) kernels: the block's GPU threads as a loop over thread ids, split at barriers.

A kernel that uses ``T.get_thread_binding()`` as a value (arithmetic, indexing) is traced a second
time in SIMT mode (the first trace, which only allows thread-role branches, raised). In SIMT mode:

- the first ``T.get_thread_binding()`` opens ``for tid in T.serial(threads)`` at the point of the call
  (at the kernel's top level); the rest of the block's code runs inside it, once per thread, thread
  after thread;
- ``T.sync_threads()`` closes that loop and opens another: every thread finishes the code before the
  barrier before any starts the code after it (a barrier inside a loop or an ``if`` raises);
- block-level tile ops (``T.copy`` / ``T.fill`` / ``T.clear`` / ``T.reduce_*`` / ``T.gemm`` /
  ``T.cumsum`` / tile atomics / ``T.Parallel``) at the thread loop's level act like barriers: the loop
  is closed, the op runs once for the block, the loop is reopened. The same op on a local buffer, or
  with thread-dependent indices, is one thread's op and runs inside the loop;
- expressions of the thread index are rebuilt where they are used (``row = pid * 128 + tid`` before a
  barrier means the same after it), and values without loads or per-thread parts stay expressions
  (``numel = n * k``); other values bound before a barrier, and ``T.alloc_local`` /
  ``T.alloc_var`` storage used on both sides of one, are per-thread registers that a single loop
  variable cannot carry: they raise NotImplementedInTessera naming the value.

Threads run one after another, so a race the GPU would have (two threads writing one element without
an atomic) gives the last thread's value here rather than an arbitrary one. Warp operations
(shuffles, warp reductions) exchange values between threads of one loop iteration and are not
provided.
"""
import re

from . import _context as ctx

MARKER = "T.get_thread_binding: the thread index is only supported"


class SimtState:
    """The thread loop of the kernel being traced."""

    def __init__(self, extents):
        self.extents = tuple(extents)
        self.total = 1
        for e in self.extents:
            self.total *= e
        self.var = None  # the loop variable of the open thread loop (a _C.TlExpr), or None
        self.segment = 0  # barriers passed so far
        self.depth = None  # (loop_depth, if_depth) where the thread loop was opened
        self.let_names = {"tid"}  # names of values bound inside thread loops (and the loop variable)
        # shared buffer name -> ids of the thread-loop-level statements that loaded / stored it since the barrier
        self.shared_read, self.shared_written = {}, {}
        self.statement = 0  # id of the current statement at the thread loop's level

    # ---- the loop ----
    def _open(self, t):
        from ._expr import as_node

        ctx.set_loc()
        self.var = t.builder.begin_for("tid", as_node(0), as_node(self.total), "serial", 0)
        self.shared_read, self.shared_written = {}, {}

    def _close(self, t):
        t.builder.end_for()
        self.var = None

    def at_loop_level(self, t):
        return self.depth == (t.loop_depth, t.if_depth)

    def thread_index(self, t, dim):
        if self.depth is None:
            if t.loop_depth or t.if_depth:
                raise ctx.not_implemented("T.get_thread_binding(): in a per-thread kernel the first call must be at "
                                          "the top level of the T.Kernel body (not inside a loop or an if)")
            self.depth = (t.loop_depth, t.if_depth)
            self._open(t)
        return ThreadIndexValue(self, int(dim))

    def current_var(self, what):
        if self.var is None:
            raise ctx.not_implemented(f"{what}: the thread index is used outside the per-thread code of the block")
        return self.var

    def barrier(self, t):
        if self.depth is None:
            return  # no per-thread code yet: nothing to order
        if not self.at_loop_level(t):
            raise ctx.not_implemented("T.sync_threads() inside a loop or an if of per-thread code: tessera runs the "
                                      "block's threads as a loop split at barriers, which needs the barrier at the "
                                      "thread loop's level")
        self._close(t)
        self.segment += 1
        self._open(t)

    def close(self, t):
        if self.var is not None:
            self._close(t)

    # ---- block-level tile ops ----
    def block_op(self, t, per_thread):
        """A context for a tile op: outside the thread loop when it is a block-level op at the loop's
        level (a barrier before and after), inside it when per_thread."""
        return _BlockOp(self, t, per_thread)

    # ---- per-thread storage and values ----
    def is_block_uniform(self, node):
        """True when an expression has no loads and names no value bound in a thread loop: it can be
        used as it is on both sides of a barrier (``numel = num_tokens * num_topk``)."""
        text = str(node)
        if "[" in text:
            return False
        return not any(re.search(rf"\b{re.escape(n)}\b", text) for n in self.let_names)

    def note_shared(self, buffer, write):
        """Records a per-thread load / store of a shared buffer. TileLang inserts the barrier a shared
        buffer needs between a store and a load of other threads' elements by itself; tessera only
        splits the thread loop at explicit barriers, so a shared buffer both stored and loaded by
        per-thread code between two barriers raises instead of giving another thread's stale value."""
        if self.var is None:
            return
        seen, mine = (self.shared_read, self.shared_written) if write else (self.shared_written, self.shared_read)
        if seen.get(buffer.name, set()) - {self.statement}:
            raise ctx.not_implemented(
                f"shared buffer '{buffer.name}' is stored by one statement of per-thread code and loaded by another "
                f"(or the reverse) with no T.sync_threads() between: TileLang inserts that barrier itself, tessera "
                f"does not yet (write the barrier)")
        mine.setdefault(buffer.name, set()).add(self.statement)
        t = ctx.active()
        if write and t is not None and self.at_loop_level(t):
            self.statement += 1  # a store at the loop's level ends its statement

    def end_of_frame(self, t):
        """A loop or if closed: back at the thread loop's level, the next statement begins. (Accesses
        within one statement are allowed: a thread updating its own element, acc[tid] += acc[tid - 1]
        style code within one if, is the common case there.)"""
        if self.var is not None and self.at_loop_level(t):
            self.statement += 1

    def check_local(self, buffer):
        """Raises when a local buffer is used by per-thread code on both sides of a barrier."""
        if self.var is None:
            return
        seen = getattr(buffer, "_simt_segment", None)
        if seen is None:
            buffer._simt_segment = self.segment
        elif seen != self.segment:
            raise ctx.not_implemented(
                f"'{buffer.name}' (per-thread storage) is used before and after a T.sync_threads(): tessera runs the "
                f"block's threads as a loop split at barriers, so per-thread values do not survive a barrier; keep it "
                f"in a shared buffer indexed by the thread index")


class _BlockOp:
    def __init__(self, state, t, per_thread):
        self.state, self.t = state, t
        self.split = state.var is not None and not per_thread and state.at_loop_level(t)
        if state.var is not None and not per_thread and not self.split:
            raise ctx.not_implemented("a block-level tile op (or T.Parallel) inside a loop or an if of per-thread "
                                      "code is not supported: tessera runs the block's threads as a loop, and a "
                                      "block-level op there would run once per thread")

    def __enter__(self):
        if self.split:
            self.state._close(self.t)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.split and exc_type is None:
            self.state.segment += 1
            self.state._open(self.t)
        return False


def state():
    """The SIMT state of the trace being recorded, or None."""
    t = ctx.active()
    return getattr(t, "simt", None) if t is not None else None


def is_thread_dependent(x):
    from ._expr import BufferRef

    if getattr(x, "thread_lazy", False):
        return True
    if isinstance(x, BufferRef):
        return any(is_thread_dependent(i) for i in x.indices if not isinstance(i, slice)) or any(
            is_thread_dependent(i.start) or is_thread_dependent(i.stop) for i in x.indices if isinstance(i, slice))
    return False


def tile_op(*operands):
    """The context a tile op runs in (a no-op outside SIMT mode)."""
    s = state()
    if s is None or s.var is None:
        return _NULL
    from ._expr import Buffer, BufferRef

    per_thread = False
    for x in operands:
        buf = x.buffer if isinstance(x, BufferRef) else x if isinstance(x, Buffer) else getattr(x, "base", None)
        if isinstance(buf, Buffer) and buf.scope == "local":
            per_thread = True
        if is_thread_dependent(x):
            per_thread = True
    return s.block_op(ctx.current(), per_thread)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL = _Null()


def _thread_value_class():
    from ._expr import Expr

    class ThreadIndexValue(Expr):
        """``T.get_thread_binding(dim)`` in a per-thread kernel: the thread loop's variable (of the loop
        open where it is used), decomposed by the T.Kernel's thread extents."""

        thread_lazy = True

        def __init__(self, state_, dim):
            super().__init__(None)
            self.state, self.dim = state_, dim

        @property
        def node(self):
            from ._expr import Expr as E

            linear = E(self.state.current_var("T.get_thread_binding()"))
            ext = self.state.extents
            if len(ext) == 1 or self.dim >= len(ext):
                return linear.node if self.dim == 0 else E(linear.node).__mul__(0).node
            inner = 1
            for e in ext[:self.dim]:
                inner *= e
            v = linear // inner if inner > 1 else linear
            return (v % ext[self.dim] if self.dim + 1 < len(ext) else v).node

        @property
        def dtype(self):
            return "int32"

    class SegmentValue(Expr):
        """A value bound (a let) in per-thread code: valid until the next barrier."""

        def __init__(self, node, state_, name):
            super().__init__(node)
            self.state, self.segment, self.name = state_, state_.segment, name

        @property
        def node(self):
            if self.state.segment != self.segment:
                raise ctx.not_implemented(
                    f"'{self.name}' is a per-thread value computed before a T.sync_threads() (or a block-level tile "
                    f"op) and used after it: tessera runs the block's threads as a loop split at barriers, so such "
                    f"values do not survive the barrier; compute it again after the barrier, or keep it in a shared "
                    f"buffer indexed by the thread index")
            return self._node

    return ThreadIndexValue, SegmentValue


ThreadIndexValue, SegmentValue = _thread_value_class()
