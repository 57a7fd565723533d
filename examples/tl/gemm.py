"""Tiled GEMM with a fused ReLU epilogue, in the three layouts TileLang's examples use:

    nn: C[M, N] = relu(A[M, K] @ B[K, N])
    nt: C[M, N] = relu(A[M, K] @ B[N, K]^T)
    tn: C[M, N] = relu(A[K, M]^T @ B[K, N])

One block computes a block_M x block_N tile of C: it walks K in block_K steps, copying a tile of A and
of B into shared buffers and accumulating their product into a float32 fragment with T.gemm (tessera's
packed bf16 micro-kernels), then applies the epilogue and writes the tile. M, N, K are dynamic: one
compiled kernel serves every shape, tails included.

Run: python examples/tl/gemm.py [M N K]
"""
import sys

import ml_dtypes
import numpy as np

import tessera
import tessera.language as T


@tessera.jit(out_idx=[-1])
def matmul(layout="nn", block_M=128, block_N=128, block_K=64, num_stages=3, relu=True, dtype="bfloat16",
           accum_dtype="float32"):
    M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")
    trans_A, trans_B = layout[0] == "t", layout[1] == "t"
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_tile = (block_K, block_M) if trans_A else (block_M, block_K)
    B_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared(A_tile, dtype)
            B_shared = T.alloc_shared(B_tile, dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=trans_A, transpose_B=trans_B)
            if relu:
                for i, j in T.Parallel(block_M, block_N):
                    C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def reference(a, b, layout="nn", relu=True):
    """float64 result of the same GEMM (inputs as given, i.e. already rounded to bf16)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    c = (a64.T if layout[0] == "t" else a64) @ (b64.T if layout[1] == "t" else b64)
    return np.maximum(c, 0) if relu else c


def make_inputs(m, n, k, layout, rng, dtype=ml_dtypes.bfloat16):
    a = rng.standard_normal((k, m) if layout[0] == "t" else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if layout[1] == "t" else (k, n)).astype(dtype)
    return a, b


def main(m=1000, n=1000, k=1000):
    rng = np.random.default_rng(0)
    for layout in ("nn", "nt", "tn"):
        kernel = matmul(layout)
        a, b = make_inputs(m, n, k, layout, rng)
        c = kernel(a, b)
        err = np.abs(c.astype(np.float64) - reference(a, b, layout)).max()
        ms = kernel.get_profiler().do_bench(input_tensors=[a, b], rep=200)
        print(f"{layout}: M={m} N={n} K={k}  max|err| {err:.3g}  {ms:.3f} ms  {2 * m * n * k / ms * 1e-9:.1f} TFLOP/s")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
