"""A loop with per-thread bounds that holds a barrier or a warp operation, in a per-thread (SIMT) kernel.

TileKernels' warp-synchronous loops (``for i in T.serial(start + lane, end, 32)`` with a
``__match_any_sync`` and a ``T.sync_warp()`` inside) have bounds that differ between threads, so the
loop cannot simply be interchanged with the thread loop as a block-uniform one is (_simt.py). Instead:
every thread stores its trip count and first value into ``[threads]`` arrays, the thread loop is split,
the block runs ``for it in range(most trips)`` and, inside it, thread loops whose threads take part
only while ``it < their trip count``. A barrier or warp operation in the body then splits those thread
loops as anywhere else. Like CUDA's full-mask warp operations, this is right when the threads of a
warp make the same number of trips (a lane that stopped early would not contribute to a later
exchange on the GPU either, but a warp operation there would be undefined behaviour).
"""
from .. import _C
from . import _context as ctx
from ._expr import Deferred, Expr, as_node
from ._math import max as tl_max


def guarded_loop(t, loop):
    s = t.simt
    step = int(loop.step)
    start, stop = loop.start, loop.stop
    ctx.set_loc()
    b = t.builder
    n = s.guarded_loops = getattr(s, "guarded_loops", 0) + 1
    trips = b.alloc(f"loop_trips{n}", [s.total], "int32", "shared")
    firsts = b.alloc(f"loop_first{n}", [s.total], "int32", "shared")
    span = stop - start if step > 0 else start - stop
    count = (tl_max(span, 0) + (abs(step) - 1)) // abs(step)
    ctx.set_loc()
    b.store(trips, [s.var], as_node(count))
    b.store(firsts, [s.var], as_node(start))
    s._close(t)
    s.segment += 1
    most = b.alloc(f"loop_most_trips{n}", [1], "int32", "local")
    b.store(most, [as_node(0)], as_node(0))
    k = b.begin_for("k", as_node(0), as_node(s.total), "serial", 0)
    b.store(most, [as_node(0)], as_node(tl_max(Expr(_C.tl_load(most, [as_node(0)])), Expr(_C.tl_load(trips, [k])))))
    b.end_for()
    it = Expr(b.begin_for("it", as_node(0), _C.tl_load(most, [as_node(0)]), "serial", 0))
    t.loop_depth += 1
    s.outer.append((s.depth, s.frames))
    s.depth, s.frames = (t.loop_depth, t.if_depth), []
    s.guards.append(lambda var: it < Expr(_C.tl_load(trips, [var])))
    s._open(t)
    yield Deferred(lambda: Expr(_C.tl_load(firsts, [s.current_var("a guarded loop's variable")])) + it * step)
    s._close(t)
    s.guards.pop()
    t.loop_depth -= 1
    b.end_for()
    s.depth, s.frames = s.outer.pop()
    s.segment += 1
    s._open(t)
    s.end_of_frame(t)
