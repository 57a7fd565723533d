"""Element-wise add with a fused activation: C = act(A + B), A, B, C [M, N] (any M, N).

Each block covers a block_M x block_N tile; the T.Parallel loop over it is vectorized (16 lanes on
AVX-512); loads and stores outside the tensor are masked off, so M and N need not divide the tile.
The activation is a Python function applied at trace time, so each choice compiles its own kernel.

Run: python examples/tl/elementwise_add.py [M N activation]
"""
import sys

import ml_dtypes
import numpy as np

import tessera
import tessera.language as T

ACTIVATIONS = {
    "none": lambda v: v,
    "relu": lambda v: T.max(v, 0.0),
    "silu": lambda v: v * T.sigmoid(v),
    "gelu_tanh": lambda v: 0.5 * v * (1.0 + T.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))),
}


@tessera.jit(out_idx=[-1])
def elementwise_add(activation="relu", block_M=8, block_N=512, dtype="bfloat16"):
    M, N = T.dynamic("M"), T.dynamic("N")
    act = ACTIVATIONS[activation]

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                y = by * block_M + i
                x = bx * block_N + j
                C[y, x] = act(A[y, x] + B[y, x])

    return main


def reference(a, b, activation="relu"):
    v = a.astype(np.float64) + b.astype(np.float64)
    if activation == "relu":
        return np.maximum(v, 0)
    if activation == "silu":
        return v / (1 + np.exp(-v))
    if activation == "gelu_tanh":
        return 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
    return v


def main(m=4096, n=4096, activation="relu"):
    rng = np.random.default_rng(0)
    kernel = elementwise_add(activation)
    a = rng.standard_normal((m, n)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((m, n)).astype(ml_dtypes.bfloat16)
    c = kernel(a, b)
    err = np.abs(c.astype(np.float64) - reference(a, b, activation)).max()
    ms = kernel.get_profiler().do_bench(input_tensors=[a, b], rep=300)
    print(f"M={m} N={n} {activation}: max|err| {err:.3g}, {ms:.3f} ms, {3 * a.nbytes / ms * 1e-6:.1f} GB/s")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]), *sys.argv[3:4])
