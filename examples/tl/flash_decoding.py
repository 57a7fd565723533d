"""Flash decoding: attention of one new token per sequence against a long KV cache (GQA), split over
the KV length so that many blocks work on one head.

    Q [batch, heads, dim], K / V [batch, seqlen_kv, heads_kv, dim] -> O [batch, heads, dim]

The program has two grids, run one after the other. The first gives each (batch, KV head, split) block
the `groups` query heads that share the KV head (one T.gemm of groups x block_N scores per step) and
writes a partial output and its log-sum-exp per split; the second combines the splits. Keys past
seqlen_kv are masked, so any length works; an empty split contributes nothing.

Run: python examples/tl/flash_decoding.py [seqlen_kv heads heads_kv dim num_split]
"""
import sys

import ml_dtypes
import numpy as np

import tessera
import tessera.language as T


@tessera.jit(out_idx=[-1])
def flash_decode(batch, heads, heads_kv, seqlen_kv, dim, num_split=4, block_N=64, dtype="bfloat16",
                 accum_dtype="float32"):
    groups = heads // heads_kv
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    split_len = T.ceildiv(seqlen_kv, num_split)

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), K: T.Tensor([batch, seqlen_kv, heads_kv, dim], dtype),
             V: T.Tensor([batch, seqlen_kv, heads_kv, dim], dtype),
             glse: T.Tensor([batch, heads, num_split], accum_dtype),
             O_partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(batch, heads_kv, num_split, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([groups, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([groups, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([groups, block_N], dtype)
            acc_o = T.alloc_fragment([groups, dim], accum_dtype)
            scores_max = T.alloc_fragment([groups], accum_dtype)
            scores_max_prev = T.alloc_fragment([groups], accum_dtype)
            scores_scale = T.alloc_fragment([groups], accum_dtype)
            scores_sum = T.alloc_fragment([groups], accum_dtype)
            logsum = T.alloc_fragment([groups], accum_dtype)

            start = bz * split_len
            stop = T.min(start + split_len, seqlen_kv)
            T.copy(Q[bx, by * groups:(by + 1) * groups, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            for k in T.Pipelined(T.ceildiv(split_len, block_N), num_stages=2):
                T.copy(K[bx, start + k * block_N:start + (k + 1) * block_N, by, :], K_shared)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(groups, block_N):
                    acc_s[i, j] = T.if_then_else(start + k * block_N + j < stop, acc_s[i, j], -T.infinity(accum_dtype))
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(groups):
                    # a block of only masked keys leaves the maximum at -inf: keep its scale finite
                    scores_scale[i] = T.if_then_else(scores_max[i] == -T.infinity(accum_dtype), 1.0,
                                                     T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale))
                for i, j in T.Parallel(groups, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(groups):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(groups, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bx, start + k * block_N:start + (k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
            for i, j in T.Parallel(groups, dim):
                O_partial[bx, by * groups + i, bz, j] = T.if_then_else(logsum[i] > 0, acc_o[i, j] / logsum[i], 0.0)
            for i in T.Parallel(groups):
                glse[bx, by * groups + i, bz] = T.if_then_else(logsum[i] > 0, T.log2(logsum[i]) + scores_max[i] * scale,
                                                               -T.infinity(accum_dtype))

        with T.Kernel(heads, batch, threads=128) as (h, b):
            lse_max = T.alloc_var(accum_dtype)
            weight_sum = T.alloc_var(accum_dtype)
            o = T.alloc_fragment([dim], accum_dtype)
            lse_max = -T.infinity(accum_dtype)
            for s in T.serial(num_split):
                lse_max = T.max(lse_max, glse[b, h, s])
            weight_sum = 0.0
            T.clear(o)
            for s in T.serial(num_split):
                w = T.exp2(glse[b, h, s] - lse_max)
                weight_sum += w
                for j in T.Parallel(dim):
                    o[j] += w * O_partial[b, h, s, j]
            for j in T.Parallel(dim):
                Output[b, h, j] = o[j] / weight_sum

    return main


def run(kernel, q, k, v, num_split):
    """Calls the kernel with fresh split buffers (they are inputs of the program, like in TileLang)."""
    batch, heads, dim = q.shape
    glse = np.empty((batch, heads, num_split), np.float32)
    o_partial = np.empty((batch, heads, num_split, dim), np.float32)
    return kernel(q, k, v, glse, o_partial)


def reference(q, k, v):
    groups = q.shape[1] // k.shape[2]
    q64 = q.astype(np.float64)
    k64 = np.repeat(k.astype(np.float64), groups, axis=2)
    v64 = np.repeat(v.astype(np.float64), groups, axis=2)
    s = np.einsum("bhd,bkhd->bhk", q64, k64) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhk,bkhd->bhd", p, v64)


def make_inputs(batch, heads, heads_kv, seqlen_kv, dim, rng, dtype=ml_dtypes.bfloat16):
    q = rng.standard_normal((batch, heads, dim)).astype(dtype)
    k = rng.standard_normal((batch, seqlen_kv, heads_kv, dim)).astype(dtype)
    v = rng.standard_normal((batch, seqlen_kv, heads_kv, dim)).astype(dtype)
    return q, k, v


def main(seqlen_kv=8192, heads=32, heads_kv=4, dim=128, num_split=8):
    rng = np.random.default_rng(0)
    kernel = flash_decode(1, heads, heads_kv, seqlen_kv, dim, num_split)
    q, k, v = make_inputs(1, heads, heads_kv, seqlen_kv, dim, rng)
    o = run(kernel, q, k, v, num_split)
    print(f"seqlen_kv {seqlen_kv} heads {heads}/{heads_kv} dim {dim} splits {num_split}: "
          f"max|err| {np.abs(o.astype(np.float64) - reference(q, k, v)).max():.3g}")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:6]))
