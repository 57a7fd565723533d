"""Split-K GEMM: C[M, N] (float32, zero on entry) += A[M, K] @ B[K, N], with K cut into split_k slices
that run as separate blocks (the third grid dimension). Each block reduces its slice into a float32
fragment and adds the tile into C with T.atomic_add - real atomics, because blocks run concurrently on
several threads. Useful when M and N are too small to give every thread a tile.

Run: python examples/tl/gemm_splitk.py [M N K split_k]
"""
import sys

import ml_dtypes
import numpy as np

import tessera
import tessera.language as T


@tessera.jit
def matmul_splitk(split_k=4, block_M=64, block_N=64, block_K=64, dtype="bfloat16", accum_dtype="float32"):
    M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            k_blocks = T.ceildiv(K, block_K)
            per_split = T.ceildiv(k_blocks, split_k)
            first = bz * per_split
            count = T.max(T.min(per_split, k_blocks - first), 0)
            for ko in T.Pipelined(count, num_stages=2):
                k = first + ko
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return main


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def main(m=256, n=256, k=4096, split_k=8):
    rng = np.random.default_rng(0)
    kernel = matmul_splitk(split_k)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    c = np.zeros((m, n), np.float32)
    kernel(a, b, c)
    err = np.abs(c - reference(a, b)).max()
    print(f"M={m} N={n} K={k} split_k={split_k}: max|err| {err:.3g}")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:5]))
