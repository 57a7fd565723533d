"""Warp operations (shuffles, warp reductions) and block-level loops / ifs in per-thread (SIMT) kernels,
checked against numpy references with odd sizes; warp_reduce_sum bitwise against the GPU's butterfly
order; the barrier TileLang inserts before a loop that reads other threads' shared stores. A barrier or
a warp operation under a per-thread condition raises NotImplementedInTessera."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera import NotImplementedInTessera

RNG = np.random.default_rng(34)


def butterfly_sum(lanes):
    """The sum a GPU warp reduction computes: lane j + lane j + half, halving (float32 throughout)."""
    v = [np.float32(x) for x in lanes]
    while len(v) > 1:
        half = len(v) // 2
        v = [np.float32(v[j] + v[j + half]) for j in range(half)]
    return v[0]


@tessera.jit(out_idx=[-1])
def warp_reductions(threads, dtype):
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n, threads), dtype), out: T.Tensor((n, 3, threads), dtype)):
        with T.Kernel(n, threads=threads) as (row,):
            tid = T.get_thread_binding()
            v = x[row, tid]
            out[row, 0, tid] = T.warp_reduce_sum(v)
            out[row, 1, tid] = T.warp_reduce_max(v)
            out[row, 2, tid] = T.warp_reduce_min(v)
    return main


@pytest.mark.parametrize("n,threads", [(1, 32), (5, 64), (3, 16)])
def test_warp_reduce_sum_max_min_float(n, threads):
    x = (RNG.standard_normal((n, threads)) * 10).astype(np.float32)
    out = warp_reductions(threads, "float32")(x)
    warp = min(32, threads)
    lanes = x.reshape(n, threads // warp, warp)
    expect_sum = np.array([[butterfly_sum(w) for w in r] for r in lanes], np.float32)
    np.testing.assert_array_equal(out[:, 0].reshape(n, -1, warp), np.repeat(expect_sum[..., None], warp, -1))
    np.testing.assert_allclose(out[:, 0].reshape(n, -1, warp)[..., 0], lanes.astype(np.float64).sum(-1),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(out[:, 1].reshape(n, -1, warp), np.repeat(lanes.max(-1, keepdims=True), warp, -1))
    np.testing.assert_array_equal(out[:, 2].reshape(n, -1, warp), np.repeat(lanes.min(-1, keepdims=True), warp, -1))


def test_warp_reductions_of_integers_and_bits():
    @tessera.jit(out_idx=[-1])
    def bits():
        @T.prim_func
        def main(x: T.Tensor((64,), "int32"), out: T.Tensor((3, 64), "int32")):
            with T.Kernel(1, threads=64) as _:
                tid = T.get_thread_binding()
                out[0, tid] = T.warp_reduce_sum(x[tid])
                out[1, tid] = T.warp_reduce_bitor(x[tid])
                out[2, tid] = T.warp_reduce_bitand(x[tid])
        return main

    x = RNG.integers(0, 1 << 20, size=64).astype(np.int32)
    out = bits()(x)
    w = x.reshape(2, 32)
    np.testing.assert_array_equal(out[0], np.repeat(w.sum(1), 32))
    np.testing.assert_array_equal(out[1], np.repeat(np.bitwise_or.reduce(w, 1), 32))
    np.testing.assert_array_equal(out[2], np.repeat(np.bitwise_and.reduce(w, 1), 32))


@tessera.jit(out_idx=[-1])
def shuffles(threads, delta, width):
    @T.prim_func
    def main(x: T.Tensor((threads,), "float32"), src: T.Tensor((threads,), "int32"),
             out: T.Tensor((4, threads), "float32")):
        with T.Kernel(1, threads=threads) as _:
            tid = T.get_thread_binding()
            out[0, tid] = T.shfl_xor(x[tid], delta, width)
            out[1, tid] = T.shfl_sync(x[tid], src[tid], width)
            out[2, tid] = T.shfl_down(x[tid], delta, width)
            out[3, tid] = T.shfl_up(x[tid], delta, width)
    return main


@pytest.mark.parametrize("threads,delta,width", [(64, 5, 32), (48, 3, 16), (32, 1, 8)])
def test_shuffles_against_lane_arithmetic(threads, delta, width):
    x = RNG.standard_normal(threads).astype(np.float32)
    src = RNG.integers(0, 64, size=threads).astype(np.int32)
    out = shuffles(threads, delta, width)(x, src)
    t = np.arange(threads)
    lane, base = t % width, t - t % width
    np.testing.assert_array_equal(out[0], x[base + (lane ^ delta) % width])
    np.testing.assert_array_equal(out[1], x[base + src % width])
    np.testing.assert_array_equal(out[2], np.where(lane + delta < width, x[np.minimum(t + delta, threads - 1)], x))
    np.testing.assert_array_equal(out[3], np.where(lane >= delta, x[np.maximum(t - delta, 0)], x))


@tessera.jit(out_idx=[-1])
def tiled_row_sums(tiles, threads):
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n, tiles * threads), "float32"), out: T.Tensor((n, 2), "float32")):
        with T.Kernel(T.ceildiv(n, 2), threads=threads) as (pid,):
            tid = T.get_thread_binding()
            tile = T.alloc_shared((threads,), "float32")
            acc = T.alloc_local((1,), "float32")
            for r in T.serial(2):  # block-uniform bounds: a block-level loop with thread loops inside
                row = pid * 2 + r
                T.clear(acc)
                for k in T.serial(tiles):
                    if k % 2 == 0:  # a block-level if (both sides copy the same tile)
                        T.copy(x[row, k * threads:(k + 1) * threads], tile)
                    else:
                        T.copy(x[row, k * threads:(k + 1) * threads], tile)
                    acc[0] += tile[tid] * (tid + 1)  # kept per thread across the copies
                total = T.warp_reduce_sum(acc[0])
                if tid == 0:
                    out[row, 0] = total
                    out[row, 1] = T.copysign(total, -1.0)
    return main


@pytest.mark.parametrize("n", [1, 6, 9])
def test_block_level_loops_and_ifs_with_per_thread_accumulators(n):
    x = RNG.standard_normal((n, 5 * 32)).astype(np.float32)
    out = tiled_row_sums(5, 32)(x)
    weights = np.tile(np.arange(1, 33, dtype=np.float64), 5)
    expect = (x.astype(np.float64) * weights).sum(1)
    np.testing.assert_allclose(out[:, 0], expect, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(out[:, 1], -np.abs(out[:, 0]))


@tessera.jit(out_idx=[-1])
def column_maxima(rows, threads):
    @T.prim_func
    def main(x: T.Tensor((rows, threads), "float32"), out: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            tid = T.get_thread_binding()
            shared = T.alloc_shared((threads,), "float32")
            best = T.alloc_var("float32")
            shared[tid] = x[0, tid]
            best = x[0, tid]
            # no T.sync_threads(): TileLang inserts the barrier before this loop, which reads other
            # threads' stores; tessera splits the thread loop there (after a trace that found it)
            for k in T.serial(threads):
                best = T.max(best, shared[(tid + k) % threads])
            out[tid] = best
    return main


@pytest.mark.parametrize("threads", [7, 32])
def test_implicit_barrier_before_a_loop_reading_other_threads_stores(threads):
    x = RNG.standard_normal((1, threads)).astype(np.float32)
    np.testing.assert_array_equal(column_maxima(1, threads)(x), np.full(threads, x.max(), np.float32))


def test_barrier_under_a_per_thread_condition_raises():
    with pytest.raises(NotImplementedInTessera, match=r"T.sync_threads\(\) inside a loop or an if of per-thread code "
                                                      r"whose bounds or condition differ between threads"):
        @T.prim_func
        def main(x: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as _:
                tid = T.get_thread_binding()
                if tid < 4:
                    x[tid] = 0.0
                    T.sync_threads()


def test_shuffle_under_a_per_thread_condition_raises():
    with pytest.raises(NotImplementedInTessera, match=r"T.shfl_xor inside a loop or an if of per-thread code"):
        @T.prim_func
        def main(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                tid = T.get_thread_binding()
                if x[tid] > 0.0:
                    x[tid] = T.shfl_xor(x[tid], 1)


def test_warp_width_must_divide_the_block():
    with pytest.raises(NotImplementedInTessera, match=r"a warp of 24 lanes in a block of 24 threads"):
        @T.prim_func
        def main(x: T.Tensor((24,), "float32")):
            with T.Kernel(1, threads=24) as _:
                tid = T.get_thread_binding()
                x[tid] = T.warp_reduce_sum(x[tid])
