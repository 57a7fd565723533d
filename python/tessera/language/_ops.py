"""Tile operations and on-chip allocations (``T.copy``, ``T.gemm``, ``T.fill``, ``T.reduce_*``,
``T.cumsum``, ``T.atomic_*``, ``T.alloc_*``). Operands are whole buffers, slices (``A[0:64, :]``) or an
element used as the corner of a tile whose extent comes from the other operand (``A[by * 128, k * 32]``).
Shapes and scopes are checked when the program is compiled; errors name the line of the call."""
import numbers

from . import _context as ctx
from ._dtypes import canonical
from ._expr import Buffer, BufferRef, Expr, VarBuffer, as_node, region_of
from ._simt import tile_op
from ._thread_storage import alloc_per_thread


def _alloc(shape, dtype, scope, default_name):
    t = ctx.current(f"T.alloc_{scope}")
    if isinstance(shape, (numbers.Integral, Expr)):
        shape = (shape,)
    dims = []
    for d in shape:
        if isinstance(d, Expr):
            v = d.node.const_int()
            if v is None:
                raise ctx.error(f"T.alloc_{scope}: on-chip buffers need constant shapes, dimension {d} is symbolic")
            d = v
        if not isinstance(d, numbers.Integral):
            raise ctx.error(f"T.alloc_{scope}: dimensions must be ints, got {d!r}")
        dims.append(int(d))
    ctx.set_loc()
    name = t.take_name(default_name)
    if scope == "local" and t.simt_mode:
        # in a per-thread kernel, storage the plan keeps per thread gets one copy per thread (_thread_storage)
        count = t.local_counts[name] = t.local_counts.get(name, 0) + 1
        if (name, count) in t.simt_plan.expand:
            return alloc_per_thread(t, name, dims, canonical(dtype))
        buf = Buffer(t.builder.alloc(name, dims, canonical(dtype), scope))
        buf._simt_key = (name, count)
    else:
        buf = Buffer(t.builder.alloc(name, dims, canonical(dtype), scope))
    if scope == "local":
        t.local_names.add(buf.name)
    return buf


def alloc_shared(shape, dtype, scope="shared.dyn"):
    """Block-visible scratch (a per-block arena buffer on the CPU)."""
    return _alloc(shape, dtype, "shared", "shared")


def alloc_fragment(shape, dtype, scope="local.fragment"):
    """The register tile of TileLang, written in whole-block shape (a per-block arena buffer)."""
    return _alloc(shape, dtype, "fragment", "fragment")


def alloc_local(shape, dtype, scope="local"):
    """Per-thread storage (on the block function's stack when small)."""
    return _alloc(shape, dtype, "local", "local")


def alloc_var(dtype, init=None, scope="local.var"):
    """A mutable scalar (see tessera.language.VarBuffer)."""
    v = VarBuffer(_alloc((1,), dtype, "local", "var"))
    if init is not None:
        v.store(init)
    return v


def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None, **_ignored):
    """dst = src (converted to dst's dtype). Source elements outside a global tensor read as 0;
    destination elements outside one are skipped."""
    t = ctx.current("T.copy")
    from ._views import copy_elementwise, is_view

    with tile_op(src, dst):
        if is_view(src) or is_view(dst):
            return copy_elementwise(src, dst)
        s, d = region_of(src, "T.copy: src"), region_of(dst, "T.copy: dst")
        ctx.set_loc()
        t.builder.copy(s, d)


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False, k_pack=1, wg_wait=0,
         **_ignored):
    """C += op(A) @ op(B) (C = ... with clear_accum); C is a float32 fragment. Runs on tessera's packed
    GEMM micro-kernels. policy / k_pack / wg_wait are GPU scheduling hints and are ignored."""
    t = ctx.current("T.gemm")
    with tile_op(A, B, C):
        a, b, c = region_of(A, "T.gemm: A"), region_of(B, "T.gemm: B"), region_of(C, "T.gemm: C")
        ctx.set_loc()
        t.builder.gemm(a, b, c, bool(transpose_A), bool(transpose_B), bool(clear_accum))


def fill(buffer, value):
    t = ctx.current("T.fill")
    from ._views import BufferView, fill_view

    with tile_op(buffer, value):
        if isinstance(buffer, BufferView):
            return fill_view(buffer, value)
        r = region_of(buffer, "T.fill: buffer")
        v = as_node(value)
        ctx.set_loc()
        t.builder.fill(r, v)


def clear(buffer):
    fill(buffer, 0)


def reduce(buffer, out, reduce_type, dim=-1, clear=True):
    t = ctx.current(f"T.reduce_{reduce_type}")
    from ._views import BufferView, reduce_through_views

    with tile_op(buffer, out):
        if isinstance(buffer, BufferView) or isinstance(out, BufferView):
            return reduce_through_views(lambda s, d, dm, c: reduce(s, d, reduce_type, dm, c), buffer, out, dim, clear)
        s, d = region_of(buffer, "T.reduce: src"), region_of(out, "T.reduce: dst")
        ctx.set_loc()
        t.builder.reduce(reduce_type, s, d, int(dim), bool(clear))


def reduce_max(buffer, out, dim=-1, clear=True):
    reduce(buffer, out, "max", dim, clear)


def reduce_min(buffer, out, dim=-1, clear=True):
    reduce(buffer, out, "min", dim, clear)


def reduce_sum(buffer, out, dim=-1, clear=True):
    reduce(buffer, out, "sum", dim, clear)


def reduce_abssum(buffer, out, dim=-1, clear=True):
    reduce(buffer, out, "abssum", dim, clear)


def reduce_absmax(buffer, out, dim=-1, clear=True):
    reduce(buffer, out, "absmax", dim, clear)


def cumsum(src, dst=None, dim=0, reverse=False):
    """Inclusive prefix sum along dim (in place when dst is None)."""
    t = ctx.current("T.cumsum")
    with tile_op(src, dst):
        s = region_of(src, "T.cumsum: src")
        d = region_of(src if dst is None else dst, "T.cumsum: dst")
        ctx.set_loc()
        t.builder.cumsum(s, d, int(dim), bool(reverse))


def _is_tile(x):
    return isinstance(x, Buffer) or (isinstance(x, BufferRef) and any(isinstance(i, slice) for i in x.indices))


def _atomic(op, dst, value):
    t = ctx.current(f"T.atomic_{op}")
    if _is_tile(value):
        with tile_op(dst, value):
            d, s = region_of(dst, f"T.atomic_{op}: dst"), region_of(value, f"T.atomic_{op}: value")
            ctx.set_loc()
            t.builder.atomic_region(op, d, s)
        return
    d = region_of(dst, f"T.atomic_{op}: dst")
    v = as_node(value)
    ctx.set_loc()
    t.builder.atomic_value(op, d, v)


def atomic_add(dst, value, memory_order=None, return_prev=False, **_ignored):
    """dst += value atomically (element, or tile by tile when value is a buffer / slice). Blocks run on
    several threads, so concurrent updates of one element are real compare-and-swap loops; the order of
    the additions (and so the rounding of float sums) depends on timing."""
    if return_prev:
        raise ctx.not_implemented("T.atomic_add(return_prev=True) is not supported")
    _atomic("add", dst, value)


def atomic_max(dst, value, memory_order=None, **_ignored):
    _atomic("max", dst, value)


def atomic_min(dst, value, memory_order=None, **_ignored):
    _atomic("min", dst, value)


# ---- GPU scheduling annotations: accepted and ignored on the CPU ----
def use_swizzle(panel_size=None, order="row", enable=True):
    """Block rasterization hint for GPU L2 reuse; blocks are scheduled dynamically on the CPU."""


def annotate_layout(layout_map):
    """Shared-memory layout hint; CPU buffers keep their row-major layout."""


def sync_threads(barrier_id=None, arrive_count=None):
    """A barrier of the block's threads: in a per-thread kernel it splits the thread loop (_simt.py);
    elsewhere a no-op (a CPU block is one thread)."""
    t = ctx.active()
    if t is not None and t.simt is not None:
        t.simt.barrier(t)


def sync_warp(mask=None):
    """A barrier of a warp: in a per-thread kernel the same split as T.sync_threads() (all threads,
    which orders at least as much); elsewhere a no-op."""
    sync_threads()


def no_set_max_nreg():
    """No-op (a GPU register-allocation hint)."""


def async_copy(src, dst, coalesced_width=None, annotations=None, loop_layout=None):
    """TileLang's asynchronous global -> shared copy: a plain T.copy on the CPU (it has completed when
    the next statement runs, so T.ptx_wait_group has nothing to wait for)."""
    copy(src, dst)


def ptx_commit_group():
    """No-op: CPU copies complete synchronously."""


def ptx_wait_group(num=0):
    """No-op: CPU copies complete synchronously."""


def pdl_sync():
    """No-op: programmatic dependent launch lets a GPU grid start before the previous one ends; CPU
    grids run one after another."""


def pdl_trigger():
    """No-op (see pdl_sync)."""


def assume(condition):
    """An optimisation hint (the condition holds); recorded nowhere on the CPU."""


def device_assert(condition, msg=""):
    """Accepted and not checked: the CPU target has no in-kernel assertion (see docs/tl.md)."""


class Fragment:
    """A GPU fragment layout (thread and register of each element), as given to T.annotate_layout;
    CPU fragments are row-major arrays, so it is accepted and ignored."""

    def __init__(self, *args, **kwargs):
        pass


Layout = Fragment
