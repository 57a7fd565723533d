"""Per-thread (SIMT) kernels: T.get_thread_binding() as a value, the block's threads run as a loop split
at T.sync_threads() and at block-level tile ops, checked against numpy references; values and local
storage that live across a barrier are kept per thread, and what cannot be split raises
NotImplementedInTessera naming it (warp operations and block-level loops: test_tl_simt_warp.py)."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera import NotImplementedInTessera

RNG = np.random.default_rng(11)


@tessera.jit
def normalize_rows(num_topk, threads):
    n = T.dynamic("n")

    @T.prim_func
    def main(w: T.Tensor((n, num_topk), "float32"), total: T.Tensor((n,), "float32"),
             out: T.Tensor((n, num_topk), "float32")):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as (pid,):
            tid = T.get_thread_binding()
            row = pid * threads + tid  # one row per thread
            kept = T.alloc_local((num_topk,), "float32")
            if row < n:
                s = T.alloc_var("float32", init=0.0)
                for i in T.vectorized(num_topk):
                    kept[i] = w[row, i]
                for i in T.unroll(num_topk):
                    s += kept[i]
                total[row] = s
                for i in T.vectorized(num_topk):
                    out[row, i] = kept[i] / s
    return main


@pytest.mark.parametrize("n,threads", [(1, 4), (13, 4), (37, 16)])
def test_one_row_per_thread(n, threads):
    w = RNG.random((n, 5)).astype(np.float32) + 0.1
    total, out = np.zeros(n, np.float32), np.zeros((n, 5), np.float32)
    normalize_rows(5, threads).call_all([w, total, out])
    w64 = w.astype(np.float64)
    np.testing.assert_allclose(total, w64.sum(1), rtol=1e-6)
    np.testing.assert_allclose(out, w64 / w64.sum(1, keepdims=True), rtol=1e-6)


@tessera.jit
def histogram(bins, threads, blocks):
    n = T.dynamic("n")

    @T.prim_func
    def main(idx: T.Tensor((n,), "int32"), counts: T.Tensor((bins,), "int32")):
        with T.Kernel(blocks, threads=threads) as (pid,):
            tid = T.get_thread_binding()
            global_tid = pid * threads + tid  # used after both barriers: rebuilt there
            limit = T.min(n, 1 << 30)  # no loads, not per-thread: usable after the barriers too
            shared = T.alloc_shared((bins,), "int32")
            T.clear(shared)  # block-level: once, before any thread's code
            T.sync_threads()
            for i in T.serial(global_tid, limit, blocks * threads):
                if idx[i] >= 0:
                    T.atomic_add(shared[idx[i]], 1)
            T.sync_threads()
            for b in T.serial(tid, bins, threads):
                T.atomic_add(counts[b], shared[b])
    return main


@pytest.mark.parametrize("n", [0, 7, 101])
def test_grid_stride_histogram_with_barriers(n):
    idx = RNG.integers(-1, 9, size=n).astype(np.int32)
    counts = np.zeros(9, np.int32)
    histogram(9, 8, 3).call_all([idx, counts])
    np.testing.assert_array_equal(counts, np.bincount(idx[idx >= 0], minlength=9))


@tessera.jit(out_idx=[-1])
def reverse_in_block(threads):
    @T.prim_func
    def main(x: T.Tensor((threads,), "float32"), y: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            tid = T.get_thread_binding()
            shared = T.alloc_shared((threads,), "float32")
            shared[tid] = x[tid] * 2.0
            T.sync_threads()  # every thread's write lands before any thread reads another's
            y[tid] = shared[threads - 1 - tid]
    return main


def test_barrier_orders_writes_before_reads_of_other_threads():
    x = RNG.standard_normal(32).astype(np.float32)
    np.testing.assert_array_equal(reverse_in_block(32)(x), (2.0 * x)[::-1])


@tessera.jit(out_idx=[-1])
def two_dim_threads():
    @T.prim_func
    def main(x: T.Tensor((4, 8), "int32"), y: T.Tensor((4, 8), "int32")):
        with T.Kernel(1, threads=(8, 4)) as _:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            y[ty, tx] = x[ty, tx] * 10 + tx - ty
    return main


def test_thread_binding_per_dimension():
    x = RNG.integers(-5, 5, size=(4, 8)).astype(np.int32)
    ty, tx = np.mgrid[0:4, 0:8]
    np.testing.assert_array_equal(two_dim_threads()(x), x * 10 + tx - ty)


@tessera.jit(out_idx=[-1])
def rotate_through_barrier(threads):
    @T.prim_func
    def main(x: T.Tensor((threads,), "float32"), out: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            tid = T.get_thread_binding()
            shared = T.alloc_shared((threads,), "float32")
            acc = T.alloc_local((2,), "float32")
            v = x[tid] + 1.0  # a per-thread value used after the barrier: kept per thread
            acc[1] = x[tid] * 2.0  # per-thread storage used after the barrier: one copy per thread
            shared[tid] = x[tid]
            T.sync_threads()
            out[tid] = v + acc[1] + shared[(tid + 1) % threads]
    return main


@pytest.mark.parametrize("threads", [5, 16])
def test_values_and_local_storage_live_across_a_barrier(threads):
    x = RNG.random(threads).astype(np.float32)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(rotate_through_barrier(threads)(x), x64 + 1.0 + 2.0 * x64 + np.roll(x64, -1),
                               rtol=1e-6)


def test_block_level_op_inside_per_thread_if_raises():
    with pytest.raises(NotImplementedInTessera, match=r"block-level tile op \(or T.Parallel\) inside a loop or an if"):
        @T.prim_func
        def main(x: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as _:
                tid = T.get_thread_binding()
                frag = T.alloc_fragment((16,), "float32")
                x[tid] = 0.0  # the thread index as a value: a per-thread kernel
                if tid == 0:
                    T.copy(x, frag)


def test_thread_role_branches_still_run_each_side_once():
    @tessera.jit(out_idx=[-1])
    def roles():
        @T.prim_func
        def main(x: T.Tensor((8,), "float32"), y: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=128) as _:
                if T.get_thread_binding() < 64:
                    for i in T.Parallel(8):
                        y[i] = x[i] + 1.0
                else:
                    for i in T.Parallel(8):
                        y[i] = y[i] * 2.0
        return main

    x = RNG.standard_normal(8).astype(np.float32)
    np.testing.assert_array_equal(roles()(x), (x + 1.0) * 2.0)


@tessera.jit
def hash_tokens(block, threads):
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n,), "int32"), y: T.Tensor((n,), "int32")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as (pid,):
            tid = T.get_thread_binding()
            token = pid * block + tid
            if token >= n or tid >= block:
                T.thread_return()  # the rest of the kernel becomes this if's else
            y[token] = x[token] * 3 + T.get_warp_idx() * 100 + T.get_lane_idx(4)
    return main


def test_thread_return_in_an_if_of_the_kernel_body_and_warp_indices():
    x = RNG.integers(-9, 9, size=95).astype(np.int32)
    y = np.full(95, 7, np.int32)
    hash_tokens(40, 64).call_all([x, y])  # threads 40..63 return at once; 32..39 are warp 1
    tid = np.arange(95) % 40
    np.testing.assert_array_equal(y, x * 3 + (tid // 32) * 100 + tid % 4)


@tessera.jit(out_idx=[-1])
def maybe_scale(only_copy):
    @T.macro
    def stop_if(flag):
        if flag:  # a Python condition: the rest of the kernel is not traced
            T.thread_return()

    @T.prim_func
    def main(x: T.Tensor((6,), "float32"), y: T.Tensor((6,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(6):
                y[i] = x[i]
            stop_if(only_copy)
            for i in T.Parallel(6):
                y[i] = y[i] * 4.0
    return main


@pytest.mark.parametrize("only_copy", [True, False])
def test_thread_return_at_trace_time_ends_the_kernel(only_copy):
    x = RNG.standard_normal(6).astype(np.float32)
    np.testing.assert_array_equal(maybe_scale(only_copy)(x), x if only_copy else x * 4.0)


@T.macro
def scale_then_maybe_stop(y, row, stop_early):
    y[row] = y[row] * 2.0
    if stop_early:  # a Python-level condition: T.thread_return() ends the enclosing branch
        T.thread_return()


@tessera.jit(out_idx=[-1])
def branch_return(n, stop_early):
    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(n) as row:
            y[row] = x[row]
            if row % 2 == 0:  # the body's last if: a return in its branch skips the rest of that branch
                scale_then_maybe_stop(y, row, stop_early)
                y[row] = y[row] + 100.0
            else:
                y[row] = -x[row]
    return main


@pytest.mark.parametrize("stop_early", [False, True])
def test_thread_return_in_a_branch_of_the_last_if_skips_the_rest_of_it(stop_early):
    x = RNG.standard_normal(9).astype(np.float32)
    even = np.arange(9) % 2 == 0
    expect = np.where(even, x * 2.0 + (0.0 if stop_early else 100.0), -x).astype(np.float32)
    np.testing.assert_array_equal(branch_return(9, stop_early)(x), expect)


def test_thread_return_inside_a_loop_raises():
    with pytest.raises(NotImplementedInTessera, match=r"T.thread_return\(\) inside a loop or an if"):
        @T.prim_func
        def main(x: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as _:
                tid = T.get_thread_binding()
                for i in T.serial(4):
                    if x[i] > 0:
                        T.thread_return()
                x[tid] = 1.0


@tessera.jit(out_idx=[-1])
def staged_copy(threads, stages):
    s = T.dynamic("s")

    @T.prim_func
    def main(x: T.StridedTensor((2, 8), (s, 1), "float32"), y: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            tid = T.get_thread_binding()
            shared = T.alloc_shared((16,), "float32")
            frag = T.alloc_fragment((8,), "float32")
            T.assume(s % 4 == 0)  # a hint on a stride symbol no shape declares: never built
            for j in T.unroll(2):
                k = tid * 2 + j
                shared[k] = x[k // 8, k % 8] * 2.0
            T.sync_threads()
            for stage in T.unroll(stages):  # unrolled while tracing: its tile ops are block-level
                T.copy(shared[stage * 8:(stage + 1) * 8], frag)
                for i in T.Parallel(8):
                    y[stage * 8 + i] = frag[i] + stage
    return main


def test_unroll_of_block_level_tile_ops_in_a_per_thread_kernel():
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    want = 2.0 * x.reshape(-1) + np.arange(16) // 8
    np.testing.assert_array_equal(staged_copy(8, 2)(x), want.astype(np.float32))


def test_shared_store_and_load_without_a_barrier_raises():
    with pytest.raises(NotImplementedInTessera, match=r"shared buffer 'shared' is stored by one statement"):
        @T.prim_func
        def main(x: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as _:
                tid = T.get_thread_binding()
                shared = T.alloc_shared((16,), "float32")
                shared[tid] = x[tid]
                x[tid] = shared[15 - tid]  # TileLang would insert the barrier here


@tessera.jit(out_idx=[-1])
def column_prefix(rows, threads):
    @T.prim_func
    def main(x: T.Tensor((rows, threads), "int32"), last: T.Tensor((threads,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            tid = T.get_thread_binding()
            shared = T.alloc_shared((rows, threads), "int32")
            for r in T.serial(rows):
                shared[r, tid] = x[r, tid]
            T.sync_threads()
            if tid < threads:  # each thread updates its own column: one statement, no barrier needed
                for r in T.unroll(rows - 1):
                    shared[r + 1, tid] += shared[r, tid]
                last[tid] = shared[rows - 1, tid]
    return main


def test_shared_updates_of_own_elements_within_one_statement():
    x = RNG.integers(-5, 5, size=(4, 8)).astype(np.int32)
    np.testing.assert_array_equal(column_prefix(4, 8)(x), x.sum(0))
