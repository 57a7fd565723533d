"""Loops: ``T.Parallel`` (element-wise nest, vectorized), ``T.Pipelined`` (prefetching serial loop),
``T.serial``, ``T.unroll``, ``T.vectorized``, ``T.grid`` and ``T.Persistent`` (a block's share of tiles). Each is a Python iterable that opens the
loop in the program, yields the loop variable(s) once for the body to be traced, then closes it.
``range()`` loops are Python loops: they unroll at trace time."""
from . import _context as ctx
from ._expr import Expr, as_node


def _bounds(start, stop):
    return (0, start) if stop is None else (start, stop)


class _Loop:
    def __init__(self, kind, start, stop=None, step=None, num_stages=0):
        self.kind = kind
        self.start, self.stop = _bounds(start, stop)
        self.step = 1 if step is None else step
        self.num_stages = int(num_stages or 0)
        self.names = ("i",)
        if not isinstance(self.step, int) or self.step == 0:
            raise ctx.not_implemented(f"T.{kind}: the step must be a non-zero Python int, got {self.step!r}")

    def _set_names(self, names):
        if names:
            self.names = names

    def __iter__(self):
        t = ctx.current(f"T.{self.kind}")
        if self._unroll_at_trace_time(t):
            yield from range(self.start, self.stop, self.step)
            return
        if t.simt is not None:
            t.simt.before_frame(t)
            if t.simt.is_guarded_here(t):
                from ._guarded_loop import guarded_loop

                yield from guarded_loop(t, self)
                return
        extent = self.stop - self.start if self.step == 1 else (self.stop - self.start + self.step - 1) // self.step
        n_min, n_ext = as_node(0 if self.step != 1 else self.start), as_node(extent)
        start = self.start if self.step != 1 else 0
        token = _enter_frame(t, n_min, n_ext, as_node(start), kind=self.kind)
        ctx.set_loc()
        var = Expr(t.builder.begin_for(self.names[0], n_min, n_ext, self.kind, self.num_stages))
        t.loop_depth += 1
        _open_inside(t, token)
        yield var if self.step == 1 else self.start + var * self.step
        _close_inside(t, token)
        t.loop_depth -= 1
        t.builder.end_for()
        _exit_frame(t, token)
        _end_of_frame(t)


    _TRACE_UNROLL_LIMIT = 64

    def _unroll_at_trace_time(self, t):
        """T.unroll with constant bounds in per-thread code is unrolled while tracing, so block-level
        tile ops in its body stand at the thread loop's level (_simt.py) as they do after unrolling."""
        if self.kind != "unrolled" or t.simt is None or t.simt.var is None:
            return False
        if not all(isinstance(v, int) for v in (self.start, self.stop)):
            return False
        return len(range(self.start, self.stop, self.step)) <= self._TRACE_UNROLL_LIMIT


def _end_of_frame(t):
    if t.simt is not None:
        t.simt.end_of_frame(t)


def _enter_frame(t, *bounds, kind=None):
    """In per-thread code: whether this loop runs inside the thread loop or block-level (_simt.py)."""
    if t.simt is None:
        return None
    return t.simt.enter_frame(t, all(t.simt.is_uniform(b) for b in bounds), loop=True, kind=kind)


def _open_inside(t, token):
    if token == "block":
        t.simt.open_inside(t)


def _close_inside(t, token):
    if token == "block":
        t.simt.close_inside(t)


def _exit_frame(t, token):
    if token is not None:
        t.simt.exit_frame(t, token)


def serial(start, stop=None, step=None, **_ignored):
    return _Loop("serial", start, stop, step)


def unroll(start, stop=None, step=None, **_ignored):
    return _Loop("unrolled", start, stop, step)


def vectorized(start, stop=None, **_ignored):
    return _Loop("parallel", start, stop)


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None):  # noqa: N802
    """A serial loop whose T.copy sources are prefetched num_stages - 1 iterations ahead (CPU analogue of
    TileLang's multi-stage pipeline; order/stage/sync/group are accepted and ignored)."""
    return _Loop("pipelined", start, stop, None, num_stages)


class Parallel:  # noqa: N801 - TileLang's spelling
    """``for i, j in T.Parallel(M, N)``: iterations are independent; the innermost loop is vectorized."""

    def __init__(self, *extents, coalesced_width=None, loop_layout=None):
        if not extents:
            raise ctx.error("T.Parallel needs at least one extent")
        self.extents = extents
        self.names = tuple("ijklmn"[d % 6] for d in range(len(extents)))

    def _set_names(self, names):
        if len(names) == len(self.extents):
            self.names = names

    def __iter__(self):
        from ._simt import tile_op

        t = ctx.current("T.Parallel")
        with tile_op(*self.extents):  # a block-level loop: once for the block in a per-thread kernel
            nodes = [as_node(e) for e in self.extents]
            ctx.set_loc()
            vars_ = [Expr(v) for v in t.builder.begin_parallel(nodes, list(self.names))]
            t.loop_depth += 1
            yield vars_[0] if len(vars_) == 1 else tuple(vars_)
            t.loop_depth -= 1
            t.builder.end_for()


class grid:  # noqa: N801
    """``for i, j in T.grid(M, N)``: a nest of serial loops."""

    def __init__(self, *extents):
        self.extents = extents
        self.names = tuple("ijklmn"[d % 6] for d in range(len(extents)))

    def _set_names(self, names):
        if len(names) == len(self.extents):
            self.names = names

    def __iter__(self):
        t = ctx.current("T.grid")
        vars_ = []
        if t.simt is not None:
            t.simt.before_frame(t)
        nodes = [as_node(e) for e in self.extents]
        token = _enter_frame(t, *nodes)
        for name, n in zip(self.names, nodes):
            ctx.set_loc()
            vars_.append(Expr(t.builder.begin_for(name, as_node(0), n, "serial", 0)))
        t.loop_depth += 1
        _open_inside(t, token)
        yield vars_[0] if len(vars_) == 1 else tuple(vars_)
        _close_inside(t, token)
        t.loop_depth -= 1
        for _ in vars_:
            t.builder.end_for()
        _exit_frame(t, token)
        _end_of_frame(t)


class Persistent:  # noqa: N801 - TileLang's spelling
    """``for t in T.Persistent([tiles...], wave_size, index)``: block ``index`` of a grid of
    ``wave_size`` blocks visits tiles index, index + wave_size, ... of the domain (row-major; the GPU
    group swizzle ``group_size`` only orders tiles for L2 reuse and is ignored). A serial loop; it
    yields the tile's index, or one index per domain dimension."""

    def __init__(self, domain, wave_size, index, group_size=8):
        self.domain = list(domain) if isinstance(domain, (list, tuple)) else [domain]
        self.wave_size, self.index = wave_size, index

    def _set_names(self, names):
        pass

    def __iter__(self):
        from ._math import ceildiv
        from ._math import max as tl_max

        total = 1
        for d in self.domain:
            total = total * d
        for k in _Loop("serial", ceildiv(tl_max(total - self.index, 0), self.wave_size)):
            linear = self.index + k * self.wave_size
            if len(self.domain) == 1:
                yield linear
                continue
            indices = []
            for d in reversed(self.domain[1:]):
                indices.append(linear % d)
                linear = linear // d
            indices.append(linear)
            yield tuple(reversed(indices))
