"""Per-thread (SIMT) kernels: the block's GPU threads as a loop over thread ids, split at barriers.

A kernel that uses ``T.get_thread_binding()`` as a value (arithmetic, indexing) is traced a second
time in SIMT mode (the first trace, which only allows thread-role branches, raised). In SIMT mode:

- the first ``T.get_thread_binding()`` opens a thread loop over ``tid`` at the point of the call (at
  the kernel's top level); the rest of the block's code runs inside it, once per thread. Threads are
  independent between barriers, so the loop is a parallel one: where its body is element-wise the
  vectorizer runs 16 threads as the lanes of one vector (consecutive threads reading consecutive
  elements, as GPU kernels are written, become contiguous vector loads);
- ``T.sync_threads()`` closes that loop and opens another: every thread finishes the code before the
  barrier before any starts the code after it;
- block-level tile ops (``T.copy`` / ``T.fill`` / ``T.clear`` / ``T.reduce_*`` / ``T.gemm`` /
  ``T.cumsum`` / tile atomics / ``T.Parallel``) at the thread loop's level act like barriers: the loop
  is closed, the op runs once for the block, the loop is reopened. The same op on a local buffer, or
  with thread-dependent indices, is one thread's op and runs inside the loop;
- expressions of the thread index are rebuilt where they are used (``row = pid * 128 + tid`` before a
  barrier means the same after it), and values without loads or per-thread parts stay expressions
  (``numel = n * k``);
- a barrier or block-level op inside a loop or an ``if`` whose bounds / condition are the same for
  every thread (block-uniform) makes that loop / if a block-level one with thread loops inside it
  (the loop nest is interchanged, as CPU OpenCL compilers do); a barrier under a per-thread
  condition raises. A ``T.serial`` loop with block-uniform bounds at the thread loop's level is
  interchanged too, barrier or not, so the thread loops inside it are innermost and can be
  vectorized (a per-thread reduction over a row's strided columns becomes vector loads of the row);
- values and ``T.alloc_local`` / ``T.alloc_var`` storage that live across a barrier are kept per
  thread: storage gets a leading ``[threads]`` dimension indexed by the thread loop's variable
  (_thread_storage.py), a value is stored into such an array where it is bound.

Which loops become block-level and what is kept per thread is found by tracing again: a trace that
meets such a case records it in the kernel's Plan and raises Replan; @T.prim_func traces the kernel
again with the plan (a few times at most per kernel). Warp operations (shuffles, warp reductions:
_warp.py) exchange values through a [threads] array at a split of the thread loop.

Threads run as a loop (16 at a time where it is vectorized), so a race the GPU would have (two threads
writing one element without an atomic) gives the last thread's value here rather than an arbitrary one.
"""
import re

from . import _context as ctx
from .._errors import NotImplementedInTessera

MARKER = "T.get_thread_binding: the thread index is only supported"
MAX_REPLANS = 64


class Replan(Exception):  # noqa: N818 - a signal to trace again, not an error
    """The trace met per-thread code that needs another structure; the Plan was extended."""


def trace_per_thread_if_needed(trace_once, what):
    """trace_once(simt, plan) traces a kernel once. A kernel that uses the thread index as a value is
    traced again as a per-thread kernel, as often as its traces learn more about its structure (Plan)."""
    try:
        return trace_once(False, None)
    except NotImplementedInTessera as e:
        if MARKER not in str(e):
            raise
    plan = Plan()
    for _ in range(MAX_REPLANS):
        try:
            return trace_once(True, plan)
        except Replan:
            continue
    raise NotImplementedInTessera(f"{what}: the per-thread kernel was traced {MAX_REPLANS} times without settling "
                                  f"which loops run block-level and what is kept per thread")


class Plan:
    """What the traces of one per-thread kernel learnt: the loops / ifs (by source line) that run
    block-level with thread loops inside, the local storage (name, occurrence) and the values
    (file, line, name) kept per thread across barriers, and the loops / ifs of per-thread code that
    get a barrier before them (a shared buffer stored before and loaded in them, or the reverse)."""

    def __init__(self):
        self.uniform, self.expand, self.spill, self.barrier = set(), set(), set(), set()
        self.guarded = set()  # loops with per-thread bounds run block-level over the most trips (_guarded_loop.py)

    def extend(self, kind, keys, why):
        """Adds keys to the plan and raises Replan; raises `why` when nothing new was learnt."""
        target = getattr(self, kind)
        new = set(keys) - target
        if not new:
            raise why
        target |= new
        raise Replan()


class SimtState:
    """The thread loop of the kernel being traced."""

    def __init__(self, extents, plan=None):
        self.plan = plan if plan is not None else Plan()
        self.frames = []  # per-thread loops / ifs open since the thread loop opened: (key, block_uniform)
        self.outer = []  # (depth, frames) of the thread loops outside the open block-level loops / ifs
        self.exchange = {}  # dtype -> the [threads] shared buffer warp operations exchange values through
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
        self.loop_keys = set()  # keys of the frames that are loops (ifs cannot be guarded)
        self.guards = []  # per open guarded loop: fn(thread var) -> the condition its thread loops run under

    # ---- the loop ----
    def _open(self, t):
        from ._expr import as_node

        ctx.set_loc()
        self.var = t.builder.begin_for("tid", as_node(0), as_node(self.total), "parallel", 0)
        for guard in self.guards:
            t.builder.begin_if(as_node(guard(self.var)))
        self.shared_read, self.shared_written = {}, {}

    def _close(self, t):
        for _ in self.guards:
            t.builder.end_if()
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
        self.need_loop_level(t, "T.sync_threads()")
        self.split(t)

    def split(self, t):
        """Every thread finishes the code so far before any runs the code after this point."""
        self._close(t)
        self.segment += 1
        self._open(t)

    def need_loop_level(self, t, what):
        """Raises unless t is at the open thread loop's level. Inside per-thread loops / ifs whose bounds
        are block-uniform, the plan makes them block-level (Replan); otherwise NotImplementedInTessera."""
        if self.at_loop_level(t):
            return
        why = ctx.not_implemented(
            f"{what} inside a loop or an if of per-thread code whose bounds or condition differ between threads: "
            f"tessera runs the block's threads as loops split at barriers, and such a barrier has no place to split")
        if self.frames and all(uniform or key in self.loop_keys for key, uniform in self.frames):
            new_uniform = {key for key, uniform in self.frames if uniform} - self.plan.uniform
            new_guarded = {key for key, uniform in self.frames if not uniform} - self.plan.guarded
            if new_uniform or new_guarded:  # a loop with per-thread bounds: guarded trips (_guarded_loop.py)
                self.plan.uniform |= new_uniform
                self.plan.guarded |= new_guarded
                raise Replan()
        raise why

    # ---- loops and ifs inside per-thread code ----
    def is_uniform(self, node):
        """True when every thread computes the same value: no thread index, no per-thread value, no load
        of per-thread storage (loads of shared and global buffers are fine)."""
        text = str(node)
        if any(re.search(rf"\b{re.escape(n)}\b", text) for n in self.let_names):
            return False
        locals_ = ctx.current().local_names
        return not any(name in locals_ for name in re.findall(r"(\w+)\[", text))

    def before_frame(self, t):
        """Called before a loop's bounds or an if's condition are built: the barrier the plan puts
        before this loop / if (the one TileLang inserts before a shared buffer's other-thread access)."""
        if self.var is not None and ctx.user_loc() in self.plan.barrier and self.at_loop_level(t):
            self.split(t)

    def is_guarded_here(self, t):
        """A loop with per-thread bounds the plan runs block-level (_guarded_loop.py)."""
        return self.var is not None and ctx.user_loc() in self.plan.guarded and self.at_loop_level(t)

    def enter_frame(self, t, uniform, loop=False, kind=None):
        """Called before a loop or an if opens. Returns None outside per-thread code, "thread" for a frame
        inside the thread loop, "block" for a block-level frame: the thread loop was closed, and
        open_inside must be called once the frame is open. Block-level: block-uniform frames the plan
        lists, and block-uniform T.serial loops (kind "serial") at the thread loop's level."""
        if self.var is None:
            return None
        key = ctx.user_loc()
        if uniform and (key in self.plan.uniform or kind == "serial") and self.at_loop_level(t):
            self._close(t)
            self.segment += 1
            return "block"
        self.frames.append((key, uniform))
        if loop:
            self.loop_keys.add(key)
        return "thread"

    def open_inside(self, t):
        self.outer.append((self.depth, self.frames))
        self.depth, self.frames = (t.loop_depth, t.if_depth), []
        self._open(t)

    def close_inside(self, t):
        self._close(t)

    def reopen_inside(self, t):
        """The else part of a block-level if begins."""
        self.segment += 1
        self._open(t)

    def exit_frame(self, t, token):
        """After a frame closed (its depth counters restored)."""
        if token == "thread":
            self.frames.pop()
        elif token == "block":
            self.depth, self.frames = self.outer.pop()
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
            why = ctx.not_implemented(
                f"shared buffer '{buffer.name}' is stored by one statement of per-thread code and loaded by another "
                f"(or the reverse) with no T.sync_threads() between: TileLang inserts that barrier itself, tessera "
                f"does so before a loop or an if of per-thread code, not before a single statement (write the "
                f"barrier)")
            if self.frames:  # frames[0] opened at the thread loop's level
                self.plan.extend("barrier", [self.frames[0][0]], why)  # a barrier before the enclosing loop / if
            raise why
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
        """A local buffer used by per-thread code on both sides of a barrier is kept per thread (Replan)."""
        if self.var is None:
            return
        seen = getattr(buffer, "_simt_segment", None)
        if seen is None:
            buffer._simt_segment = self.segment
        elif seen != self.segment:
            why = ctx.not_implemented(
                f"'{buffer.name}' (per-thread storage) is used before and after a T.sync_threads(), and it could "
                f"not be kept per thread")
            key = getattr(buffer, "_simt_key", None)
            if key is None:
                raise why
            self.plan.extend("expand", [key], why)

    def bind(self, t, name, node, key):
        """A per-thread value bound where it is computed: a let valid until the next barrier, or (when
        the plan says it lives across one) stored into a [threads] array and loaded where it is used."""
        if key in self.plan.spill:
            from ._thread_storage import spill

            return spill(t, name, node)
        self.let_names.add(name)
        return SegmentValue(t.builder.let(name, node), self, name, key)


class _BlockOp:
    def __init__(self, state, t, per_thread):
        self.state, self.t = state, t
        if state.var is not None and not per_thread:
            state.need_loop_level(t, "a block-level tile op (or T.Parallel)")
        self.split = state.var is not None and not per_thread

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

        def _extent(self):
            ext = self.state.extents
            return self.state.total if len(ext) == 1 else (ext[self.dim] if self.dim < len(ext) else 1)

        # a warp index of a block that is one warp (tid // 32 with 32 threads) is 0 for every thread:
        # folding it keeps conditions on it block-uniform (_simt.is_uniform)
        def __floordiv__(self, o):
            if isinstance(o, int) and not isinstance(o, bool) and o >= self._extent():
                return 0
            return super().__floordiv__(o)

        def __mod__(self, o):
            if isinstance(o, int) and not isinstance(o, bool) and o >= self._extent():
                return self
            return super().__mod__(o)

    class SegmentValue(Expr):
        """A value bound (a let) in per-thread code: valid until the next barrier."""

        def __init__(self, node, state_, name, key=None):
            super().__init__(node)
            self.state, self.segment, self.name, self.key = state_, state_.segment, name, key

        @property
        def node(self):
            if self.state.segment != self.segment:
                why = ctx.not_implemented(
                    f"'{self.name}' is a per-thread value computed before a T.sync_threads() (or a block-level tile "
                    f"op) and used after it, and it could not be kept per thread; compute it again after the "
                    f"barrier, or keep it in a shared buffer indexed by the thread index")
                if self.key is None:
                    raise why
                self.state.plan.extend("spill", [self.key], why)
            return self._node

    return ThreadIndexValue, SegmentValue


ThreadIndexValue, SegmentValue = _thread_value_class()
