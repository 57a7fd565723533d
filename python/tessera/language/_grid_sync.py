"""``T.sync_grid()``: a barrier across every block of the launch (TileLang's cooperative-grid sync).

On a GPU the blocks of a cooperative launch are all resident and wait for each other at the barrier.
tessera runs the blocks of a grid as iterations of one parallel sweep over its thread pool, so the
barrier ends that sweep and starts another over the same grid (KernelBuilder::split_launch): every
block runs its code up to the barrier in the first sweep and its code from the barrier on in the
second, so global memory written before the barrier is visible to every block after it.

Per-block state that lives across the barrier is kept per block, as per-thread state is kept per
thread across ``T.sync_threads()`` in a per-thread kernel (_thread_storage.py):
- every on-chip buffer allocated before the barrier (shared, fragment, local, ``T.alloc_var``, and
  the ``[threads]`` storage of a per-thread kernel) is copied into a scratch tensor
  ``[*grid, *shape]`` at the end of the first sweep and back at the start of the second;
- values bound at the kernel body's level without loads are bound again after the barrier (the same
  expression); a value with loads used after the barrier raises (it would read memory again);
- in a per-thread kernel the thread loop is split as at ``T.sync_threads()``, so per-thread values
  and locals that live across it go to ``[threads]`` storage (the kernel's plan), then are carried
  like any buffer.

Where: at the top level of the T.Kernel body only. Inside a loop or an if (even a block-uniform one)
it raises NotImplementedInTessera: the loop or if would have to be cut across two sweeps.
"""
import numbers

from .. import _C
from . import _context as ctx
from ._expr import DynamicDim, Expr, as_node


def sync_grid():
    """Every block of the grid reaches this point before any block goes on (see the module doc)."""
    t = ctx.current("T.sync_grid()")
    if t.kernel_depth == 0:
        raise ctx.error("T.sync_grid(): only inside a T.Kernel body")
    if t.loop_depth or t.if_depth:
        raise ctx.not_implemented(
            "T.sync_grid() inside a loop or an if: tessera runs a grid barrier by ending the sweep over the "
            "grid's blocks and starting another, so it must stand at the top level of the T.Kernel body "
            "(where every block reaches it exactly once)")
    grid = _grid_dims(t)
    simt = t.simt
    in_threads = simt is not None and simt.var is not None
    if in_threads:
        simt._close(t)
    block_vars = [Expr(v) for v in t.kernel_block_vars]
    carried = []
    for buf in _live_buffers(t):
        scratch = _scratch_for(t, buf, grid)
        _copy(t, buf, scratch, block_vars, to_scratch=True)
        carried.append((buf, scratch))
    ctx.set_loc()
    t.builder.split_launch()
    t.grid_phase += 1
    for buf, scratch in carried:
        _copy(t, buf, scratch, block_vars, to_scratch=False)
    if in_threads:
        simt.segment += 1
        simt._open(t)


def _grid_dims(t):
    dims = []
    for g in t.kernel_grid:
        if isinstance(g, numbers.Integral) or isinstance(g, DynamicDim):
            dims.append(g)
        elif isinstance(g, Expr) and g.node.const_int() is not None:
            dims.append(int(g.node.const_int()))
        elif isinstance(g, Expr) and g.node.var_name() in t.symbols:
            dims.append(DynamicDim(g.node.var_name()))
        else:
            raise ctx.not_implemented(
                f"T.sync_grid(): the grid extent {g} must be an int or a T.dynamic symbol (the per-block state "
                f"carried across the barrier is sized by the grid)")
    return dims


def _live_buffers(t):
    """The on-chip buffers of the open T.Kernel (allocations are hoisted to the kernel)."""
    return list(t.builder.kernel_allocs())


def _scratch_for(t, handle, grid):
    from ._kernel import ParamInfo

    name = f"{handle.name}_grid_carry{t.grid_phase}"
    shape = [as_node(g) if not isinstance(g, DynamicDim) else t.symbol(g.name) for g in grid]
    shape += list(handle.shape)
    ctx.set_loc()
    scratch = t.builder.scratch_tensor(name, shape, handle.dtype)
    dims = [g if isinstance(g, numbers.Integral) else g.name for g in grid]
    dims += [int(d.const_int()) for d in handle.shape]
    t.params.append(ParamInfo(name, True, handle.dtype, dims, role="scratch"))
    return scratch


def _copy(t, handle, scratch, block_vars, to_scratch):
    """buffer <-> scratch[block] as an element loop nest (any buffer scope, any dtype)."""
    ctx.set_loc()
    b = t.builder
    idx = [b.begin_for(f"carry{k}", as_node(0), d, "serial", 0) for k, d in enumerate(handle.shape)]
    at_block = [bv.node for bv in block_vars] + idx
    if to_scratch:
        b.store(scratch, at_block, _C.tl_load(handle, idx))
    else:
        b.store(handle, idx, _C.tl_load(scratch, at_block))
    for _ in idx:
        b.end_for()


def phase_value(t, name, let, node):
    """A value bound at the kernel body's level: with loads, valid only in the grid phase that bound it."""
    if "[" in str(node):
        return PhaseValue(let, t, name)
    return Expr(let)


class PhaseValue(Expr):
    """A let with loads: after a T.sync_grid() the memory it read may have changed, so its use raises."""

    def __init__(self, node, trace, name):
        super().__init__(node)
        self.trace, self.phase, self.name = trace, trace.grid_phase, name

    @property
    def node(self):
        if self.trace.grid_phase != self.phase:
            raise ctx.not_implemented(
                f"'{self.name}' was computed from loads before a T.sync_grid() and is used after it: the grid "
                f"barrier splits the kernel into two sweeps over the blocks, and such a value is not carried "
                f"(keep it in a T.alloc_var, which is carried per block, or load it again after the barrier)")
        return self._node
