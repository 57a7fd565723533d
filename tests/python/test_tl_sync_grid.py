"""T.sync_grid(): a barrier across every block of the launch, run as two sweeps over the grid. Kernels
whose blocks write partial results, sync the grid and read the other blocks' partials, checked against
float64 numpy references; on-chip state (fragments, locals, per-thread values of SIMT kernels) kept per
block across the barrier; results bitwise equal with 1 and 2 pool threads; placements that cannot be
split raise NotImplementedInTessera naming the rule."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera import NotImplementedInTessera

RNG = np.random.default_rng(23)


@tessera.jit
def normalize_by_global_sum(block_n):
    """Each block sums its tile into partial[bx]; after the grid barrier every block divides its tile
    (a fragment kept from before the barrier) by the sum of all partials."""
    nb = T.dynamic("nb")

    @T.prim_func
    def main(x: T.Tensor((nb, block_n), "float32"), partial: T.Tensor((nb,), "float32"),
             out: T.Tensor((nb, block_n), "float32")):
        with T.Kernel(nb, threads=128) as bx:
            tile = T.alloc_fragment((block_n,), "float32")
            sums = T.alloc_fragment((1,), "float32")
            scale = bx * 0 + 2  # no loads: bound again after the barrier
            T.copy(x[bx, 0], tile)
            T.reduce_sum(tile, sums, dim=0)
            partial[bx] = sums[0]
            T.sync_grid()
            total = T.alloc_var("float32", init=0.0)
            for b in T.serial(nb):
                total += partial[b]
            for i in T.Parallel(block_n):
                out[bx, i] = tile[i] * scale / total
    return main


def _global_sum_case(nb, block_n, threads, seed=5):
    x = np.random.default_rng(seed).random((nb, block_n)).astype(np.float32) + 0.25
    partial, out = np.zeros(nb, np.float32), np.zeros((nb, block_n), np.float32)
    tessera.set_num_threads(threads)
    try:
        normalize_by_global_sum(block_n).call_all([x, partial, out])
    finally:
        tessera.set_num_threads(0)
    return x, partial, out


@pytest.mark.parametrize("nb,block_n", [(1, 7), (13, 37), (5, 129)])
def test_grid_sum_reads_every_blocks_partial(nb, block_n):
    x, partial, out = _global_sum_case(nb, block_n, 2)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(partial, x64.sum(1), rtol=1e-5)
    np.testing.assert_allclose(out, x64 * 2 / x64.sum(), rtol=1e-5)


def test_grid_sum_bitwise_equal_across_thread_counts():
    runs = [_global_sum_case(11, 45, threads) for threads in (1, 2)]
    assert np.array_equal(runs[0][2].view(np.uint32), runs[1][2].view(np.uint32))
    assert np.array_equal(runs[0][1].view(np.uint32), runs[1][1].view(np.uint32))


@tessera.jit
def normalize_by_global_max(blocks, threads):
    """SIMT style: thread tid of block pid owns element pid * threads + tid. A per-thread let (half)
    and a local (kept) live across both barriers; thread 0 of each block writes the block's
    max, and after T.sync_grid() every thread scans all blocks' maxima."""
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), block_max: T.Tensor((blocks,), "float32"),
             out: T.Tensor((n,), "float32")):
        with T.Kernel(blocks, threads=threads) as (pid,):
            tid = T.get_thread_binding()
            row = pid * threads + tid
            kept = T.alloc_local((1,), "float32")
            stage = T.alloc_shared((threads,), "float32")
            v = T.if_then_else(row < n, x[T.min(row, n - 1)], 0.0)
            kept[0] = v * 3.0
            half = kept[0] * 0.5  # a per-thread let used after both barriers: kept per thread
            stage[tid] = v
            T.sync_threads()
            if tid == 0:
                best = T.alloc_var("float32", init=0.0)
                for i in T.serial(threads):
                    best = T.max(best, stage[i])
                block_max[pid] = best
            T.sync_grid()
            gmax = T.alloc_var("float32", init=0.0)
            for b in T.serial(blocks):
                gmax = T.max(gmax, block_max[b])
            if row < n:
                out[row] = (v + kept[0] + half) / gmax
    return main


@pytest.mark.parametrize("n,blocks,threads", [(1, 1, 4), (37, 5, 8), (301, 9, 64)])
def test_simt_global_max_keeps_per_thread_state(n, blocks, threads):
    x = RNG.random(n).astype(np.float32) + 0.5
    block_max, out = np.zeros(blocks, np.float32), np.zeros(n, np.float32)
    normalize_by_global_max(blocks, threads).call_all([x, block_max, out])
    x64 = x.astype(np.float64)
    want_blocks = [x64[b * threads:(b + 1) * threads].max(initial=0.0) for b in range(blocks)]
    np.testing.assert_array_equal(block_max, np.float32(want_blocks))
    np.testing.assert_allclose(out, 5.5 * x64 / x64.max(), rtol=1e-6)


def test_simt_global_max_bitwise_equal_across_thread_counts():
    x = RNG.random(123).astype(np.float32)
    outs = []
    for pool in (1, 2):
        out = np.zeros(123, np.float32)
        tessera.set_num_threads(pool)
        try:
            normalize_by_global_max(7, 32).call_all([x, np.zeros(7, np.float32), out])
        finally:
            tessera.set_num_threads(0)
        outs.append(out.view(np.uint32).copy())
    assert np.array_equal(outs[0], outs[1])


def _trace(body_kind):
    @T.prim_func
    def main(x: T.Tensor((64,), "float32"), y: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            if body_kind == "loop":
                for _ in T.serial(3):  # block-uniform, but the barrier would cut the loop across sweeps
                    T.sync_grid()
            elif body_kind == "if":
                if bx < 2:
                    T.sync_grid()
            elif body_kind == "loaded_value":
                v = x[bx] + 1.0
                T.sync_grid()
                y[bx] = v
    return main


@pytest.mark.parametrize("body_kind,words", [
    ("loop", "top level of the T.Kernel body"),
    ("if", "top level of the T.Kernel body"),
    ("loaded_value", "computed from loads before a T.sync_grid()"),
])
def test_unsupported_placements_raise(body_kind, words):
    with pytest.raises(NotImplementedInTessera, match="sync_grid|T.Kernel body") as e:
        _trace(body_kind)
    assert words in str(e.value)


def test_grid_extent_expression_raises():
    n = T.dynamic("n")
    with pytest.raises(NotImplementedInTessera, match="grid extent"):
        @T.prim_func
        def main(x: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, 64), threads=32) as bx:
                T.sync_grid()
                x[bx] = 0.0


def test_outside_a_kernel_is_an_error():
    from tessera import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="T.sync_grid"):
        T.sync_grid()
