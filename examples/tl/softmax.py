"""Online softmax over long rows: Y[m, :] = softmax(X[m, :]) for any M and N.

One pass over the row keeps the running maximum and the running sum of exp(x - max) (rescaled by
exp(old_max - new_max) whenever the maximum grows); a second pass writes exp(x - max) / sum. Columns
past N are masked to -inf, so N need not divide the tile width.

Run: python examples/tl/softmax.py [M N]
"""
import sys

import numpy as np

import tessera
import tessera.language as T


@tessera.jit(out_idx=[-1])
def online_softmax(blk_m=4, blk_n=1024, dtype="float32"):
    M, N = T.dynamic("M"), T.dynamic("N")
    log2e = 1.4426950408889634

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            tile = T.alloc_fragment((blk_m, blk_n), "float32")
            row_max = T.alloc_fragment((blk_m,), "float32")
            tile_max = T.alloc_fragment((blk_m,), "float32")
            row_sum = T.alloc_fragment((blk_m,), "float32")
            tile_sum = T.alloc_fragment((blk_m,), "float32")
            T.fill(row_max, -T.infinity("float32"))
            T.fill(row_sum, 0)
            for k in T.serial(T.ceildiv(N, blk_n)):
                T.copy(X[bx * blk_m, k * blk_n], tile)
                for i, j in T.Parallel(blk_m, blk_n):
                    tile[i, j] = T.if_then_else(k * blk_n + j < N, tile[i, j] * log2e, -T.infinity("float32"))
                T.reduce_max(tile, tile_max, dim=1)
                for i in T.Parallel(blk_m):
                    tile_max[i] = T.max(tile_max[i], row_max[i])
                for i, j in T.Parallel(blk_m, blk_n):
                    tile[i, j] = T.exp2(tile[i, j] - tile_max[i])
                T.reduce_sum(tile, tile_sum, dim=1)
                for i in T.Parallel(blk_m):
                    row_sum[i] = row_sum[i] * T.exp2(row_max[i] - tile_max[i]) + tile_sum[i]
                    row_max[i] = tile_max[i]
            for k in T.serial(T.ceildiv(N, blk_n)):
                T.copy(X[bx * blk_m, k * blk_n], tile)
                for i, j in T.Parallel(blk_m, blk_n):
                    tile[i, j] = T.exp2(tile[i, j] * log2e - row_max[i]) / row_sum[i]
                T.copy(tile, Y[bx * blk_m, k * blk_n])

    return main


def reference(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main(m=1024, n=8192):
    rng = np.random.default_rng(0)
    kernel = online_softmax()
    x = (rng.standard_normal((m, n)) * 4).astype(np.float32)
    y = kernel(x)
    err = np.abs(y - reference(x)).max()
    ms = kernel.get_profiler().do_bench(input_tensors=[x], rep=200)
    print(f"M={m} N={n}: max|err| {err:.3g}, {ms:.3f} ms")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
