"""RMSNorm: Y[m, :] = X[m, :] / sqrt(mean(X[m, :]^2) + eps) * W  (any number of rows M; N fixed).

A block normalises blk_m rows: it loads them into a float32 fragment, squares, reduces each row with
T.reduce_sum (vectorized row helper), turns the sums into 1/rms with T.rsqrt, scales and stores.

Run: python examples/tl/rmsnorm.py [M N]
"""
import sys

import ml_dtypes
import numpy as np

import tessera
import tessera.language as T


@tessera.jit(out_idx=[-1])
def rms_norm(N, blk_m=4, eps=1e-6, dtype="bfloat16"):
    M = T.dynamic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), "float32")
            sq = T.alloc_fragment((blk_m, N), "float32")
            inv_rms = T.alloc_fragment((blk_m,), "float32")
            T.copy(X[bx * blk_m, 0], x)
            for i, j in T.Parallel(blk_m, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, inv_rms, dim=1)
            for i in T.Parallel(blk_m):
                inv_rms[i] = T.rsqrt(inv_rms[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                x[i, j] = x[i, j] * inv_rms[i] * W[j]
            T.copy(x, Y[bx * blk_m, 0])

    return main


def reference(x, w, eps=1e-6):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(axis=-1, keepdims=True) + eps) * w.astype(np.float64)


def main(m=4096, n=4096):
    rng = np.random.default_rng(0)
    kernel = rms_norm(n)
    x = rng.standard_normal((m, n)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    y = kernel(x, w)
    err = np.abs(y.astype(np.float64) - reference(x, w)).max()
    ms = kernel.get_profiler().do_bench(input_tensors=[x, w], rep=200)
    print(f"M={m} N={n}: max|err| {err:.3g}, {ms:.3f} ms, {2 * x.nbytes / ms * 1e-6:.1f} GB/s")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
