"""Warp operations of per-thread (SIMT) kernels: ``T.shfl_xor`` / ``shfl_sync`` / ``shfl_down`` /
``shfl_up`` and ``T.warp_reduce_{sum,max,min,bitand,bitor}``.

A CPU block runs its threads as loops over thread ids (_simt.py), so lanes cannot read each other's
registers. A warp operation is an exchange: every thread stores its value into a ``[threads]`` array,
the thread loop is split there (all threads have stored), and each thread reads the lanes it needs
(right after the split; two arrays per dtype alternate, so the next exchange cannot overwrite lanes
that other threads have yet to read).
The operation must be reached by every thread of the block at the thread loop's level (as CUDA's
full-mask ``__shfl_*_sync`` must be reached by the whole warp): inside a loop or an if whose bounds
are the same for every thread it makes that loop block-level; under a per-thread condition it raises.

warp_reduce_sum adds in the order of the GPU's butterfly (lane offsets 16, 8, 4, 2, 1), so every lane
gets the same, bitwise GPU-equal sum. A warp is 32 threads, or the whole block when it has fewer.
"""
from .. import _C
from . import _context as ctx
from ._expr import Expr, as_node
from ._math import if_then_else, max as tl_max, min as tl_min

WARP_SIZE = 32


def _state(what):
    from ._threads import _PER_THREAD

    t = ctx.current(what)
    if not t.simt_mode:
        raise ctx.not_implemented(f"{_PER_THREAD} ({what})")  # traced again as a per-thread kernel
    s = t.simt
    if s is None or s.var is None:
        raise ctx.not_implemented(f"{what}: warp operations are only supported in per-thread code (after "
                                  f"T.get_thread_binding())")
    return t, s


def _width(s, width, what):
    w = min(int(width), s.total)
    if w & (w - 1) or s.total % w:
        raise ctx.not_implemented(f"{what}: a warp of {w} lanes in a block of {s.total} threads (the width must be "
                                  f"a power of two dividing the block's thread count)")
    return w


def _exchange(value, what):
    """Stores every thread's value, splits the thread loop; returns (trace, state, buffer handle)."""
    t, s = _state(what)
    s.need_loop_level(t, what)
    node = as_node(value)
    # two arrays per dtype, used in turn: the next exchange may store (in the segment where this one's
    # lanes are read) before every thread has read them
    pair = s.exchange.get(node.dtype)
    if pair is None:
        ctx.set_loc()
        pair = s.exchange[node.dtype] = [t.builder.alloc(f"warp_exchange_{node.dtype}", [s.total], node.dtype, "shared")
                                         for _ in range(2)]
    buf = pair[0]
    pair.reverse()
    ctx.set_loc()
    t.builder.store(buf, [s.var], node)
    s.split(t)
    return t, s, buf


def _result(t, s, node, what):
    """The exchanged value, bound where it is computed (a per-thread value; kept per thread when it is
    used after a later barrier)."""
    return s.bind(t, "shfl", node, ctx.user_loc() + (what,))


def _load(buf, index):
    ctx.set_loc()
    return Expr(_C.tl_load(buf, [as_node(index)]))


def shfl_xor(value, delta, width=WARP_SIZE, mask=None):
    """The value of lane (lane ^ delta) of the calling thread's warp."""
    t, s, buf = _exchange(value, "T.shfl_xor")
    w = _width(s, width, "T.shfl_xor")
    tid = Expr(s.var)
    lane = tid % w
    return _result(t, s, _load(buf, tid - lane + ((lane ^ delta) % w)).node, "T.shfl_xor")


def shfl_sync(value, src_lane, width=WARP_SIZE, mask=None):
    """The value of lane src_lane (mod width) of the calling thread's warp."""
    t, s, buf = _exchange(value, "T.shfl_sync")
    w = _width(s, width, "T.shfl_sync")
    tid = Expr(s.var)
    return _result(t, s, _load(buf, tid - tid % w + src_lane % w).node, "T.shfl_sync")


def shfl_down(value, delta, width=WARP_SIZE, mask=None):
    """The value of lane + delta; lanes past the warp's end keep their own value (as on CUDA)."""
    t, s, buf = _exchange(value, "T.shfl_down")
    w = _width(s, width, "T.shfl_down")
    tid = Expr(s.var)
    inside = tid % w + delta < w
    node = if_then_else(inside, _load(buf, tl_min(tid + delta, s.total - 1)), _load(buf, tid)).node
    return _result(t, s, node, "T.shfl_down")


def shfl_up(value, delta, width=WARP_SIZE, mask=None):
    """The value of lane - delta; lanes before delta keep their own value (as on CUDA)."""
    t, s, buf = _exchange(value, "T.shfl_up")
    w = _width(s, width, "T.shfl_up")
    tid = Expr(s.var)
    inside = tid % w >= delta
    node = if_then_else(inside, _load(buf, tl_max(tid - delta, 0)), _load(buf, tid)).node
    return _result(t, s, node, "T.shfl_up")


def _warp_reduce(value, combine, what):
    t, s, buf = _exchange(value, what)
    w = _width(s, WARP_SIZE, what)
    tid = Expr(s.var)
    base = tid - tid % w
    lanes = [_load(buf, base + j) for j in range(w)]
    while len(lanes) > 1:  # the butterfly's order: lane j with lane j + half, halving
        half = len(lanes) // 2
        lanes = [combine(lanes[j], lanes[j + half]) for j in range(half)]
    return _result(t, s, as_node(lanes[0]), what)


def warp_reduce_sum(value):
    """The sum of value over the calling thread's warp (every lane gets it)."""
    return _warp_reduce(value, lambda a, b: a + b, "T.warp_reduce_sum")


def warp_reduce_max(value):
    return _warp_reduce(value, tl_max, "T.warp_reduce_max")


def warp_reduce_min(value):
    return _warp_reduce(value, tl_min, "T.warp_reduce_min")


def warp_reduce_bitand(value):
    return _warp_reduce(value, lambda a, b: a & b, "T.warp_reduce_bitand")


def warp_reduce_bitor(value):
    return _warp_reduce(value, lambda a, b: a | b, "T.warp_reduce_bitor")


def match_any_sync(value, mask=0xFFFFFFFF):
    """CUDA's ``__match_any_sync``: a uint32 with bit j set for every lane j of the calling thread's warp
    whose value equals this thread's (the full mask only: every lane takes part)."""
    if not (isinstance(mask, int) and mask & 0xFFFFFFFF == 0xFFFFFFFF):
        raise ctx.not_implemented(f"__match_any_sync: only the full mask 0xFFFFFFFF is supported, got {mask!r}")
    t, s, buf = _exchange(value, "__match_any_sync")
    w = _width(s, WARP_SIZE, "__match_any_sync")
    tid = Expr(s.var)
    base = tid - tid % w
    mine = _load(buf, tid)
    bits = None
    for j in range(w):
        bit = if_then_else(_load(buf, base + j) == mine, _uint32(1 << j), _uint32(0))
        bits = bit if bits is None else bits | bit
    return _result(t, s, as_node(bits), "__match_any_sync")


def _uint32(v):
    from ._expr import cast

    return cast("uint32", v)
