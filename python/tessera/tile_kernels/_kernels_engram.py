"""Tile-language kernels of tessera.tile_kernels.engram (hash and fused weight)."""

from .. import language as T
from ..tl import compile as tl_compile
from ._kernel_cache import kernel_cache


@kernel_cache
def engram_hash(max_ngram: int, layers: int, tables: int):
    """out[l, t, (n - 1) * tables + e] = (h_n(l, t) mod vocab[l, n - 1, e]) + offsets[l, ...], where
    h_1 = id_0 * m_0 and h_n = h_(n-1) xor id_(n-1) * m_(n-1) in int64 (m = multipliers[l])."""
    tokens = T.dynamic("num_tokens")
    cols = (max_ngram - 1) * tables
    rows = 64

    @T.prim_func
    def main(ids: T.Tensor((tokens, max_ngram), "int32"), multipliers: T.Tensor((layers, max_ngram), "int64"),
             vocab: T.Tensor((layers, max_ngram - 1, tables), "int32"), offsets: T.Tensor((layers, cols), "int32"),
             out: T.Tensor((layers, tokens, cols), "int32")):
        with T.Kernel(T.ceildiv(tokens, rows), layers, threads=128) as (bt, layer):
            # h[n, i]: the token loops below run along contiguous rows (h[i, n] took 3-lane and stride-3 vectors)
            h = T.alloc_fragment((max_ngram, rows), "int64")
            for n, i in T.Parallel(max_ngram, rows):
                h[n, i] = T.cast(ids[bt * rows + i, n], "int64") * multipliers[layer, n]
            for n in T.serial(1, max_ngram):
                for i in T.Parallel(rows):
                    h[n, i] = h[n - 1, i] ^ h[n, i]
            # the sizes once per block (gathered per token row, they took a quarter of the time)
            sizes = T.alloc_fragment((cols,), "int64")
            for c in T.Parallel(cols):
                sizes[c] = T.cast(vocab[layer, c // tables, c % tables], "int64")
            # one loop over the (n, e) columns: with (n, e) nested, 8 tables filled half of each 16-lane
            # vector and the masked half divided too
            for i, c in T.Parallel(rows, cols):
                # max(., 1): masked-off vector lanes read 0 here and compute the modulo too
                size = T.max(sizes[c], T.cast(1, "int64"))
                out[layer, bt * rows + i, c] = T.cast(h[c // tables + 1, i] % size, "int32") + offsets[layer, c]

    return tl_compile(main)


@kernel_cache
def fused_weight(hc_mult: int, hidden: int):
    @T.prim_func
    def main(weight_hidden: T.Tensor((hc_mult, hidden), "bfloat16"), weight_embed: T.Tensor((hc_mult, hidden), "bfloat16"),
             out: T.Tensor((hc_mult, hidden), "float32")):
        with T.Kernel(hc_mult, threads=128) as r:
            for j in T.Parallel(hidden):
                out[r, j] = T.cast(weight_hidden[r, j], "float32") * T.cast(weight_embed[r, j], "float32")

    return tl_compile(main)
