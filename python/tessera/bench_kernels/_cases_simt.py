"""The SIMT row pair: a row softmax written per thread (TileLang's SIMT style: T.get_thread_binding,
strided per-thread loops, warp reductions, the warps' partial results combined through shared memory)
against the same softmax in tile style (a row fragment, T.reduce_max / T.reduce_sum). Both read x once
and write y once, so they are DRAM-bound like the other rows; the target is SIMT within 1.5x of tile."""
import functools

import numpy as np

from ._case import Case, ratio, rotated, sample_rows

_LOG2E = 1.4426950408889634
_WARP = 32


@functools.lru_cache(maxsize=None)
def softmax_simt(n: int, threads: int):
    from .. import language as T
    from ..tl import compile as tl_compile

    m, warps, steps = T.dynamic("m"), threads // _WARP, n // threads

    @T.prim_func
    def main(x: T.Tensor((m, n), "float32"), y: T.Tensor((m, n), "float32")):
        with T.Kernel(m, threads=threads) as row:
            tid = T.get_thread_binding()
            partial = T.alloc_shared((2, warps), "float32")
            acc = T.alloc_local((1,), "float32")
            acc[0] = -T.infinity("float32")
            for j in T.serial(steps):  # thread tid reads columns tid, tid + threads, ... (coalesced on a GPU)
                acc[0] = T.max(acc[0], x[row, j * threads + tid])
            warp_max = T.warp_reduce_max(acc[0])
            if tid % _WARP == 0:
                partial[0, tid // _WARP] = warp_max
            T.sync_threads()
            row_max = T.alloc_local((1,), "float32")
            row_max[0] = partial[0, 0]
            for w in T.unroll(1, warps):
                row_max[0] = T.max(row_max[0], partial[0, w])
            acc[0] = 0.0
            for j in T.serial(steps):
                acc[0] += T.exp2((x[row, j * threads + tid] - row_max[0]) * _LOG2E)
            warp_sum = T.warp_reduce_sum(acc[0])
            if tid % _WARP == 0:
                partial[1, tid // _WARP] = warp_sum
            T.sync_threads()
            total = T.alloc_local((1,), "float32")
            total[0] = 0.0
            for w in T.unroll(warps):
                total[0] += partial[1, w]
            for j in T.serial(steps):
                c = j * threads + tid
                y[row, c] = T.exp2((x[row, c] - row_max[0]) * _LOG2E) / total[0]

    return tl_compile(main)


@functools.lru_cache(maxsize=None)
def softmax_tile(n: int, threads: int):
    from .. import language as T
    from ..tl import compile as tl_compile

    m = T.dynamic("m")

    @T.prim_func
    def main(x: T.Tensor((m, n), "float32"), y: T.Tensor((m, n), "float32")):
        with T.Kernel(m, threads=threads) as row:
            tile = T.alloc_fragment((1, n), "float32")
            row_max = T.alloc_fragment((1,), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.copy(x[row:row + 1, 0:n], tile)
            T.reduce_max(tile, row_max, dim=1)
            for i, j in T.Parallel(1, n):
                tile[i, j] = T.exp2((tile[i, j] - row_max[i]) * _LOG2E)
            T.reduce_sum(tile, total, dim=1)
            for i, j in T.Parallel(1, n):
                tile[i, j] = tile[i, j] / total[i]
            T.copy(tile, y[row:row + 1, 0:n])

    return tl_compile(main)


def softmax_pair(rows, n, copies_for, threads=128):
    """Case softmax_simt with the tile-style kernel as its peer ("tl_tile")."""
    if n % threads:
        raise ValueError(f"softmax_pair: n ({n}) must be a multiple of threads ({threads})")
    simt, tile = softmax_simt(n, threads), softmax_tile(n, threads)
    gen = np.random.default_rng(15)
    x0 = gen.standard_normal((rows, n), dtype=np.float32) * 4
    xs = rotated(x0, copies_for(x0.nbytes))
    checked = sample_rows(rows)

    def run(kernel, x):
        y = np.empty_like(x)
        kernel.call_all([x, y])
        return y

    def check(y):
        x64 = x0[checked].astype(np.float64)
        e = np.exp(x64 - x64.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
        return ratio(np.abs(y[checked] - want), 1e-5 * want + 1e-12)

    return Case("softmax_simt", rows, n, threads, x0.nbytes * 2, len(xs), lambda i: run(simt, xs[i]),
                {"tl_tile": lambda i: run(tile, xs[i])}, check)
