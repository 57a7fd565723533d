"""Tile-language kernels of tessera.tile_kernels.engram (hash, fused weight, the gate forward and
backward, the weight-gradient reduction)."""

from .. import language as T
from ..tl import compile as tl_compile
from ._kernel_cache import kernel_cache
from ._kernels_mhc import block_tokens


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


# ---- the Engram gate: out = x + sigmoid(signed_sqrt(dot(x * w, k) * rstd_x * rstd_k / sqrt(H))) * v ----

@kernel_cache
def engram_gate_fwd(hc_mult: int, hidden: int, eps: float, clamp_value: float, save: bool):
    """One block per (token, head): the three row sums (x^2, k^2, x w k) in float32, then the gate and
    the output row. With save, also the raw dot (sum of x w k), the gate and both rstds."""
    tokens = T.dynamic("num_tokens")
    scalar = hidden ** -0.5
    chunk = min(1024, hidden)

    @T.prim_func
    def main(x: T.Tensor((tokens, hc_mult, hidden), "bfloat16"), k: T.Tensor((tokens, hc_mult, hidden), "bfloat16"),
             v: T.Tensor((tokens, hidden), "bfloat16"), w: T.Tensor((hc_mult, hidden), "float32"),
             out: T.Tensor((tokens, hc_mult, hidden), "bfloat16"), dot: T.Tensor((tokens, hc_mult), "float32"),
             gate: T.Tensor((tokens, hc_mult), "float32"), rstd_x: T.Tensor((tokens, hc_mult), "float32"),
             rstd_k: T.Tensor((tokens, hc_mult), "float32")):
        with T.Kernel(tokens, hc_mult, threads=128) as (t, h):
            # the row in chunks whose terms stay in L1 (whole 7168-wide rows of terms went to L2)
            terms = T.alloc_fragment((3, chunk), "float32")
            part = T.alloc_fragment((3,), "float32")
            sums = T.alloc_fragment((3,), "float32")
            g = T.alloc_fragment((1,), "float32")
            T.clear(sums)
            for c in T.serial(T.ceildiv(hidden, chunk)):
                for j in T.Parallel(chunk):
                    col = c * chunk + j
                    live = col < hidden
                    xf = T.if_then_else(live, T.cast(x[t, h, col], "float32"), 0.0)
                    kf = T.if_then_else(live, T.cast(k[t, h, col], "float32"), 0.0)
                    terms[0, j] = xf * xf
                    terms[1, j] = kf * kf
                    terms[2, j] = xf * T.if_then_else(live, w[h, col], 0.0) * kf
                T.reduce_sum(terms, part, dim=1)
                for i in T.Parallel(3):
                    sums[i] += part[i]
            rx = T.rsqrt(sums[0] / hidden + eps)
            rk = T.rsqrt(sums[1] / hidden + eps)
            d = sums[2] * rx * rk * scalar
            g[0] = T.sigmoid(T.copysign(T.sqrt(T.max(T.abs(d), clamp_value)), d))
            if save:
                dot[t, h] = sums[2]
                gate[t, h] = g[0]
                rstd_x[t, h] = rx
                rstd_k[t, h] = rk
            for j in T.Parallel(hidden):
                out[t, h, j] = T.cast(T.cast(x[t, h, j], "float32") + g[0] * T.cast(v[t, j], "float32"), "bfloat16")

    return tl_compile(main)


@kernel_cache
def engram_gate_bwd(hc_mult: int, hidden: int, clamp_value: float, blocks: int):
    """Gradients of the gate for the saved forward values. Block b takes a contiguous run of tokens and
    writes their weight gradient (d loss / d w, summed over its tokens in order) to grad_w[b]; the
    per-token gradients are independent. ds = d loss / d dot (the raw sum): zero where the clamp held
    (|scaled dot| < clamp_value), else d loss/d gate * g (1 - g) * sqrt(scale / |dot|) / 2 with
    scale = rstd_x rstd_k / sqrt(H)."""
    tokens = T.dynamic("num_tokens")
    scalar = hidden ** -0.5

    @T.prim_func
    def main(grad_out: T.Tensor((tokens, hc_mult, hidden), "bfloat16"),
             x: T.Tensor((tokens, hc_mult, hidden), "bfloat16"), k: T.Tensor((tokens, hc_mult, hidden), "bfloat16"),
             v: T.Tensor((tokens, hidden), "bfloat16"), w: T.Tensor((hc_mult, hidden), "float32"),
             dot: T.Tensor((tokens, hc_mult), "float32"), gate: T.Tensor((tokens, hc_mult), "float32"),
             rstd_x: T.Tensor((tokens, hc_mult), "float32"), rstd_k: T.Tensor((tokens, hc_mult), "float32"),
             grad_x: T.Tensor((tokens, hc_mult, hidden), "bfloat16"),
             grad_k: T.Tensor((tokens, hc_mult, hidden), "bfloat16"), grad_v: T.Tensor((tokens, hidden), "bfloat16"),
             grad_w: T.Tensor((blocks, hc_mult, hidden), "float32")):
        with T.Kernel(blocks, threads=128) as b:
            acc_w = T.alloc_fragment((hc_mult, hidden), "float32")
            terms = T.alloc_fragment((hc_mult, hidden), "float32")
            dl_dg = T.alloc_fragment((hc_mult,), "float32")
            ds = T.alloc_fragment((hc_mult,), "float32")
            gv = T.alloc_fragment((hidden,), "float32")
            T.clear(acc_w)
            for t in block_tokens(tokens, blocks, b):
                for h, j in T.Parallel(hc_mult, hidden):
                    terms[h, j] = T.cast(grad_out[t, h, j], "float32") * T.cast(v[t, j], "float32")
                T.reduce_sum(terms, dl_dg, dim=1)
                for h in T.Parallel(hc_mult):
                    g = gate[t, h]
                    scale = rstd_x[t, h] * rstd_k[t, h] * scalar
                    ds[h] = T.if_then_else(T.abs(dot[t, h]) * scale < clamp_value, 0.0,
                                           dl_dg[h] * g * (1.0 - g) * 0.5 * T.sqrt(scale / T.abs(dot[t, h])))
                T.clear(gv)
                for h in T.serial(hc_mult):
                    for j in T.Parallel(hidden):
                        gv[j] += T.cast(grad_out[t, h, j], "float32") * gate[t, h]
                for j in T.Parallel(hidden):
                    grad_v[t, j] = T.cast(gv[j], "bfloat16")
                for h, j in T.Parallel(hc_mult, hidden):
                    xf = T.cast(x[t, h, j], "float32")
                    kf = T.cast(k[t, h, j], "float32")
                    rx = rstd_x[t, h]
                    rk = rstd_k[t, h]
                    grad_x[t, h, j] = T.cast(T.cast(grad_out[t, h, j], "float32")
                                             + ds[h] * (kf * w[h, j] - xf * (dot[t, h] * rx * rx / hidden)), "bfloat16")
                    grad_k[t, h, j] = T.cast(ds[h] * (xf * w[h, j] - kf * (dot[t, h] * rk * rk / hidden)), "bfloat16")
                    acc_w[h, j] += ds[h] * xf * kf
            for h, j in T.Parallel(hc_mult, hidden):
                grad_w[b, h, j] = acc_w[h, j]

    return tl_compile(main)


@kernel_cache
def engram_grad_w_reduce(blocks: int, hc_mult: int, hidden: int):
    """grad_wh += (sum over blocks of grad_w) * we and grad_we += (that sum) * wh, in float32; the
    blocks are summed in order."""
    cols = 512

    @T.prim_func
    def main(grad_w: T.Tensor((blocks, hc_mult, hidden), "float32"), wh: T.Tensor((hc_mult, hidden), "bfloat16"),
             we: T.Tensor((hc_mult, hidden), "bfloat16"), grad_wh: T.Tensor((hc_mult, hidden), "float32"),
             grad_we: T.Tensor((hc_mult, hidden), "float32")):
        with T.Kernel(T.ceildiv(hidden, cols), hc_mult, threads=128) as (bj, h):
            total = T.alloc_fragment((cols,), "float32")
            T.clear(total)
            for p in T.serial(blocks):
                for j in T.Parallel(cols):
                    if bj * cols + j < hidden:
                        total[j] += grad_w[p, h, bj * cols + j]
            for j in T.Parallel(cols):
                c = bj * cols + j
                if c < hidden:
                    grad_wh[h, c] = grad_wh[h, c] + total[j] * T.cast(we[h, c], "float32")
                    grad_we[h, c] = grad_we[h, c] + total[j] * T.cast(wh[h, c], "float32")

    return tl_compile(main)
