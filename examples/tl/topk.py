"""Top-k of every row: values and indices of the k largest logits (k passes of max-and-mask, as in
TileLang's top-k example). Indices of equal values: the largest index wins.

Run: python examples/tl/topk.py [M N k]
"""
import sys

import numpy as np

import tessera
import tessera.language as T


@tessera.jit(out_idx=[1, 2])
def topk(N, k, blk_m=16, dtype="float32"):
    M = T.dynamic("M")

    @T.prim_func
    def main(logits: T.Tensor((M, N), dtype), topk_gates: T.Tensor((M, k), dtype),
             topk_indices: T.Tensor((M, k), "int32")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            logits_frag = T.alloc_fragment([blk_m, N], dtype)
            max_val = T.alloc_fragment([blk_m], dtype)
            expand_max_idx = T.alloc_fragment([blk_m, N], "int32")
            max_idx = T.alloc_fragment([blk_m], "int32")
            T.copy(logits[bx * blk_m, 0], logits_frag)
            for r in T.serial(k):
                T.fill(expand_max_idx, -1)
                T.reduce_max(logits_frag, max_val, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    expand_max_idx[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], j, expand_max_idx[i, j])
                T.reduce_max(expand_max_idx, max_idx, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    logits_frag[i, j] = T.if_then_else(j == max_idx[i], -T.infinity(dtype), logits_frag[i, j])
                for i in T.Parallel(blk_m):
                    topk_gates[bx * blk_m + i, r] = max_val[i]
                    topk_indices[bx * blk_m + i, r] = max_idx[i]

    return main


def reference(logits, k):
    """Values and indices by a stable sort of -logits (distinct random values: no ties)."""
    idx = np.argsort(-logits.astype(np.float64), axis=1, kind="stable")[:, :k]
    return np.take_along_axis(logits, idx, axis=1), idx.astype(np.int32)


def main(m=4096, n=256, k=8):
    rng = np.random.default_rng(0)
    kernel = topk(n, k)
    logits = rng.standard_normal((m, n)).astype(np.float32)
    vals, idx = kernel(logits)
    rv, ri = reference(logits, k)
    print(f"M={m} N={n} k={k}: values equal {np.array_equal(vals, rv)}, indices equal {np.array_equal(idx, ri)}")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:4]))
