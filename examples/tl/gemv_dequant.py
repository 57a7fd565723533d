"""Dequantising GEMV (decode-time linear layer): y[n] = sum_k W[n, k] * x[k] with low-precision weights.

  fp8:  W float8_e4m3 [N, K], one float32 scale per row and 128-wide K block: scale[n, k // 128]
  int4: W packed [N, K // 2] (uint8, element 2i in the low nibble) of signed int4 codes (-8..7)
  fp4:  the same packing of float4 e2m1 codes (T.decode_e2m1)
        int4 / fp4 scales: float32 [N, K // group] (group = block_K)

fp8: each block computes block_N outputs with one T.gemm per 128-wide K block (x as a one-row A), then
applies that block's scales. gemv_fp8_tiled is the same kernel over weights stored tile by tile
(tile_fp8 repacks them), which a CPU streams sequentially. int4 / fp4: a float32 fragment accumulates products lane-wise (codes
decoded in registers), then T.reduce_sum folds it. Either way the weights are read once.

Run: python examples/tl/gemv_dequant.py [N K]
"""
import sys

import ml_dtypes
import numpy as np

import tessera
import tessera.language as T


@tessera.jit(out_idx=[-1])
def gemv_fp8(K, block_N=256, block_K=128, out_dtype="float32", tiled=False):
    """fp8 weights through T.gemm with one row of A (x): the tile GEMM streams each weight row once,
    converting to bf16 in registers. x is bfloat16; the copies into shared buffers only feed the gemm,
    so the compiler reads the tensors directly (no copy).

    tiled=True reads weights stored tile by tile (see tile_fp8): W[N // block_N, K // 128, block_N, 128],
    scale[N // block_N, K // 128, block_N], y[N // block_N, block_N]. Each T.gemm then reads one
    contiguous block_N x 128 tile and the K loop walks tiles in memory order, so a CPU streams the
    weights sequentially; with row-major weights each step touches block_N rows K bytes apart, which
    the memory system serves more slowly (`tessera bench tl`: gemv_fp8 vs gemv_fp8_tiled)."""
    N = T.dynamic("NB" if tiled else "N")
    k_blocks = K // block_K
    assert K % block_K == 0 and block_K == 128, "one scale per 128-wide block"
    w_shape = (N, k_blocks, block_N, block_K) if tiled else (N, K)
    s_shape = (N, k_blocks, block_N) if tiled else (N, k_blocks)
    y_shape = (N, block_N) if tiled else (N,)

    @T.prim_func
    def main(W: T.Tensor(w_shape, "float8_e4m3"), scale: T.Tensor(s_shape, "float32"),
             x: T.Tensor((K,), "bfloat16"), y: T.Tensor(y_shape, out_dtype)):
        with T.Kernel(N if tiled else T.ceildiv(N, block_N), threads=128) as bx:
            x_shared = T.alloc_shared((1, block_K), "bfloat16")
            w_shared = T.alloc_shared((block_N, block_K), "float8_e4m3")
            part = T.alloc_fragment((1, block_N), "float32")
            acc = T.alloc_fragment((block_N,), "float32")
            T.clear(acc)
            for k in T.Pipelined(k_blocks, num_stages=2):
                T.copy(x[k * block_K:(k + 1) * block_K], x_shared)
                T.copy(W[bx, k, 0, 0] if tiled else W[bx * block_N, k * block_K], w_shared)
                T.gemm(x_shared, w_shared, part, transpose_B=True, clear_accum=True)
                for j in T.Parallel(block_N):
                    acc[j] += part[0, j] * (scale[bx, k, j] if tiled else scale[bx * block_N + j, k])
            for j in T.Parallel(block_N):
                if tiled:
                    y[bx, j] = acc[j]
                else:
                    y[bx * block_N + j] = acc[j]

    return main


def gemv_fp8_tiled(K, block_N=64, **kwargs):
    """gemv_fp8 over tile-major weights (tiled=True), 64-row tiles by default."""
    return gemv_fp8(K, block_N=block_N, tiled=True, **kwargs)


def tile_fp8(w, scale, block_N=64, block_K=128):
    """Row-major W [N, K] and scale [N, K // 128] -> the tile-major layout gemv_fp8_tiled reads
    (N a multiple of block_N). A one-time repacking of the weights, as a deployment would store them."""
    n, k = w.shape
    assert n % block_N == 0 and k % block_K == 0, "N a multiple of block_N, K of block_K"
    tiles = w.reshape(n // block_N, block_N, k // block_K, block_K).transpose(0, 2, 1, 3)
    scales = scale.reshape(n // block_N, block_N, k // block_K).transpose(0, 2, 1)
    return np.ascontiguousarray(tiles), np.ascontiguousarray(scales)


@tessera.jit(out_idx=[-1])
def gemv_4bit(K, fmt="int4", block_N=8, block_K=128, x_dtype="bfloat16", out_dtype="float32"):
    """fmt "int4" (two's complement codes) or "fp4" (e2m1 codes); group = block_K."""
    N = T.dynamic("N")
    half = block_K // 2
    groups = K // block_K
    assert K % block_K == 0

    def decode(code):
        return T.decode_e2m1(code) if fmt == "fp4" else T.Cast("float32", (code ^ 8) - 8)

    @T.prim_func
    def main(W: T.Tensor((N, K // 2), "uint8"), scale: T.Tensor((N, groups), "float32"),
             x: T.Tensor((K,), x_dtype), y: T.Tensor((N,), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            x_even = T.alloc_shared((half,), "float32")
            x_odd = T.alloc_shared((half,), "float32")
            acc = T.alloc_fragment((block_N, half), "float32")
            out = T.alloc_fragment((block_N,), "float32")
            T.clear(acc)
            for k in T.Pipelined(groups, num_stages=2):
                for j in T.Parallel(half):  # de-interleave x once per step, so the weight loop is contiguous
                    x_even[j] = x[k * block_K + 2 * j]
                    x_odd[j] = x[k * block_K + 2 * j + 1]
                for i, j in T.Parallel(block_N, half):
                    row = bx * block_N + i
                    byte = T.Cast("int32", W[row, k * half + j])
                    s = scale[row, k]
                    acc[i, j] += (decode(byte & 15) * x_even[j] + decode(byte >> 4) * x_odd[j]) * s
            T.reduce_sum(acc, out, dim=1)
            for i in T.Parallel(block_N):
                y[bx * block_N + i] = out[i]

    return main


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float64)


def dequantize_fp8(w, scale, block_K=128):
    return w.astype(np.float64) * np.repeat(scale.astype(np.float64), block_K, axis=1)[:, :w.shape[1]]


def dequantize_4bit(w_packed, scale, fmt, block_K=128):
    lo, hi = (w_packed & 15).astype(np.int64), (w_packed >> 4).astype(np.int64)
    codes = np.stack([lo, hi], axis=-1).reshape(w_packed.shape[0], -1)
    values = E2M1[codes] if fmt == "fp4" else ((codes ^ 8) - 8).astype(np.float64)
    return values * np.repeat(scale.astype(np.float64), block_K, axis=1)


def make_fp8(n, k, rng):
    w = (rng.standard_normal((n, k)) * 4).astype(ml_dtypes.float8_e4m3fn)
    scale = rng.uniform(0.5, 2.0, (n, k // 128)).astype(np.float32)
    x = rng.standard_normal(k).astype(ml_dtypes.bfloat16)
    return w, scale, x


def make_4bit(n, k, rng, block_K=128):
    w = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    scale = rng.uniform(0.5, 2.0, (n, k // block_K)).astype(np.float32)
    x = rng.standard_normal(k).astype(ml_dtypes.bfloat16)
    return w, scale, x


def main(n=8192, k=4096):
    rng = np.random.default_rng(0)
    w, s, x = make_fp8(n, k, rng)
    kernel = gemv_fp8(k)
    y = kernel(w, s, x)
    ref = dequantize_fp8(w, s) @ x.astype(np.float64)
    ms = kernel.get_profiler().do_bench(input_tensors=[w, s, x], rep=200)
    print(f"fp8  N={n} K={k}: max rel err {np.abs(y - ref).max() / np.abs(ref).max():.3g}, {ms:.3f} ms, "
          f"{w.nbytes / ms * 1e-6:.1f} GB/s of weights")
    wt, st = tile_fp8(w, s)
    kernel = gemv_fp8_tiled(k)
    y = kernel(wt, st, x).reshape(-1)
    ms = kernel.get_profiler().do_bench(input_tensors=[wt, st, x], rep=200)
    print(f"fp8 tile-major N={n} K={k}: max rel err {np.abs(y - ref).max() / np.abs(ref).max():.3g}, "
          f"{ms:.3f} ms, {wt.nbytes / ms * 1e-6:.1f} GB/s of weights")
    for fmt in ("int4", "fp4"):
        w, s, x = make_4bit(n, k, rng)
        kernel = gemv_4bit(k, fmt)
        y = kernel(w, s, x)
        ref = dequantize_4bit(w, s, fmt) @ x.astype(np.float64)
        ms = kernel.get_profiler().do_bench(input_tensors=[w, s, x], rep=200)
        print(f"{fmt} N={n} K={k}: max rel err {np.abs(y - ref).max() / np.abs(ref).max():.3g}, {ms:.3f} ms, "
              f"{w.nbytes / ms * 1e-6:.1f} GB/s of weights")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
