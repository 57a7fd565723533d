"""FlashAttention forward (causal or not; MHA, or GQA with `groups` query heads per KV head).

    Q: [batch, seq_len, heads, dim]   K, V: [batch, seq_len, heads // groups, dim]   O like Q

Each block owns block_M query rows of one head. It keeps the running row maximum and row sum of the
softmax (online softmax) and an un-normalised output accumulator, and walks the keys in block_N steps:
S = Q K^T (T.gemm), mask, rescale by the change of the maximum, P = exp2(S * scale - max), O += P V.
Keys past seq_len (and, when causal, past the query row) are masked to -inf, so any seq_len works.

Run: python examples/tl/flash_attention.py [seq_len heads dim causal groups]
"""
import sys

import ml_dtypes
import numpy as np

import tessera
import tessera.language as T


@tessera.jit(out_idx=[3])
def flashattn(batch, heads, seq_len, dim, is_causal, groups=1, block_M=64, block_N=64, num_stages=2,
              dtype="bfloat16", accum_dtype="float32"):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax through exp2
    head_kv = heads // groups
    q_shape = [batch, seq_len, heads, dim]
    kv_shape = [batch, seq_len, head_kv, dim]

    @T.macro
    def scores(K, Q_shared, K_shared, acc_s, k, bx, by, bz):
        T.copy(K[bz, k * block_N:(k + 1) * block_N, by // groups, :], K_shared)
        T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True)
        for i, j in T.Parallel(block_M, block_N):
            key = k * block_N + j
            visible = (key < seq_len) & (key <= bx * block_M + i) if is_causal else key < seq_len
            acc_s[i, j] = T.if_then_else(visible, acc_s[i, j], -T.infinity(accum_dtype))

    @T.macro
    def softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum):
        T.copy(scores_max, scores_max_prev)
        T.reduce_max(acc_s, scores_max, dim=1, clear=False)
        for i in T.Parallel(block_M):
            scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            p = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
            acc_s[i, j] = p
            acc_s_cast[i, j] = p  # the bf16 copy for P @ V, in the same pass
        T.reduce_sum(acc_s, scores_sum, dim=1)
        for i in T.Parallel(block_M):
            logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             Output: T.Tensor(q_shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            loop_range = (T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                          if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                scores(K, Q_shared, K_shared, acc_s, k, bx, by, bz)
                softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by // groups, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


def reference(q, k, v, is_causal, groups=1):
    """float64 softmax attention on the (bf16-rounded) inputs."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    k64 = np.repeat(k64, groups, axis=2)
    v64 = np.repeat(v64, groups, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q64, k64) / np.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v64)


def make_inputs(batch, heads, seq_len, dim, groups, rng, dtype=ml_dtypes.bfloat16):
    q = rng.standard_normal((batch, seq_len, heads, dim)).astype(dtype)
    k = rng.standard_normal((batch, seq_len, heads // groups, dim)).astype(dtype)
    v = rng.standard_normal((batch, seq_len, heads // groups, dim)).astype(dtype)
    return q, k, v


def main(seq_len=1000, heads=8, dim=128, causal=1, groups=2):
    rng = np.random.default_rng(0)
    kernel = flashattn(1, heads, seq_len, dim, bool(causal), groups)
    q, k, v = make_inputs(1, heads, seq_len, dim, groups, rng)
    o = kernel(q, k, v)
    err = np.abs(o.astype(np.float64) - reference(q, k, v, bool(causal), groups)).max()
    ms = kernel.get_profiler().do_bench(input_tensors=[q, k, v], rep=300)
    flops = 4.0 * heads * seq_len * seq_len * dim * (0.5 if causal else 1.0)
    print(f"seq {seq_len} heads {heads} dim {dim} causal {bool(causal)} groups {groups}: max|err| {err:.3g}, "
          f"{ms:.2f} ms, {flops / ms * 1e-6:.1f} GFLOP/s")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:6]))
