"""Tile-language kernels of tessera.tile_kernels.modeling.mhc.ops (expand, head mix, Sinkhorn)."""

from .. import language as T
from ..tl import compile as tl_compile
from ._kernel_cache import kernel_cache

# Blocks of the backward kernels' parameter-gradient partials: a constant, so the sums do not depend
# on the machine or the thread count (the caller adds the partial rows in order).
PARTIAL_BLOCKS = 32


def block_tokens(tokens, blocks, b):
    """The tokens of block b of `blocks` (contiguous runs of ceil(tokens / blocks)), as a serial loop."""
    per_block = T.ceildiv(tokens, blocks)
    return T.serial(T.min(per_block * b, tokens), T.min(per_block * (b + 1), tokens))


@kernel_cache
def expand_fwd(mhc_mult: int, hidden: int):
    """o[i, m, :] = x[i, :] for every m (bf16)."""
    tokens = T.dynamic("num_tokens")
    rows = 8

    @T.prim_func
    def main(x: T.Tensor((tokens, hidden), "bfloat16"), o: T.Tensor((tokens, mhc_mult, hidden), "bfloat16")):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as b:
            for i, m, j in T.Parallel(rows, mhc_mult, hidden):
                if b * rows + i < tokens:
                    o[b * rows + i, m, j] = x[b * rows + i, j]

    return tl_compile(main)


@kernel_cache
def expand_bwd(mhc_mult: int, hidden: int):
    """x_grad[i, :] = the float32 sum over m of o_grad[i, m, :] (m in order), rounded to bf16."""
    tokens = T.dynamic("num_tokens")

    @T.prim_func
    def main(o_grad: T.Tensor((tokens, mhc_mult, hidden), "bfloat16"), x_grad: T.Tensor((tokens, hidden), "bfloat16")):
        with T.Kernel(tokens, threads=128) as i:
            acc = T.alloc_fragment((hidden,), "float32")
            T.clear(acc)
            for m in T.serial(mhc_mult):
                for j in T.Parallel(hidden):
                    acc[j] += T.cast(o_grad[i, m, j], "float32")
            for j in T.Parallel(hidden):
                x_grad[i, j] = T.cast(acc[j], "bfloat16")

    return tl_compile(main)


@kernel_cache
def head_compute_mix_fwd(mhc_mult: int, eps: float):
    """out = sigmoid(x * scale[0] + base[j]) + eps (float32 [tokens, mhc_mult])."""
    tokens = T.dynamic("num_tokens")
    rows = 64

    @T.prim_func
    def main(x: T.Tensor((tokens, mhc_mult), "float32"), scale: T.Tensor((1,), "float32"),
             base: T.Tensor((mhc_mult,), "float32"), out: T.Tensor((tokens, mhc_mult), "float32")):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as b:
            for i, j in T.Parallel(rows, mhc_mult):
                if b * rows + i < tokens:
                    out[b * rows + i, j] = T.sigmoid(x[b * rows + i, j] * scale[0] + base[j]) + eps

    return tl_compile(main)


@kernel_cache
def head_compute_mix_bwd(mhc_mult: int):
    """With s = sigmoid(x * scale + base) and dz = grad * s (1 - s): x_grad = dz * scale; block b's
    contiguous run of tokens adds sum(dz * x) to scale_partial[b] and sum over tokens of dz to
    base_partial[b] (in token order)."""
    tokens = T.dynamic("num_tokens")
    blocks = PARTIAL_BLOCKS

    @T.prim_func
    def main(grad: T.Tensor((tokens, mhc_mult), "float32"), x: T.Tensor((tokens, mhc_mult), "float32"),
             scale: T.Tensor((1,), "float32"), base: T.Tensor((mhc_mult,), "float32"),
             x_grad: T.Tensor((tokens, mhc_mult), "float32"), scale_partial: T.Tensor((blocks, 1), "float32"),
             base_partial: T.Tensor((blocks, mhc_mult), "float32")):
        with T.Kernel(blocks, threads=128) as b:
            acc_base = T.alloc_fragment((mhc_mult,), "float32")
            acc_scale = T.alloc_fragment((mhc_mult,), "float32")
            dz = T.alloc_fragment((mhc_mult,), "float32")
            T.clear(acc_base)
            T.clear(acc_scale)
            for t in block_tokens(tokens, blocks, b):
                for j in T.Parallel(mhc_mult):
                    s = T.sigmoid(x[t, j] * scale[0] + base[j])
                    dz[j] = grad[t, j] * s * (1.0 - s)
                    x_grad[t, j] = dz[j] * scale[0]
                    acc_base[j] += dz[j]
                    acc_scale[j] += dz[j] * x[t, j]
            total = acc_scale[0]
            for j in range(1, mhc_mult):
                total = total + acc_scale[j]
            scale_partial[b, 0] = total
            for j in T.Parallel(mhc_mult):
                base_partial[b, j] = acc_base[j]

    return tl_compile(main)


def _row_sum(y, r, i, n):
    """y[r, i, 0] + ... + y[r, i, n - 1], left to right."""
    s = y[r, i, 0]
    for k in range(1, n):
        s = s + y[r, i, k]
    return s


def _col_sum(y, r, j, n):
    s = y[r, 0, j]
    for k in range(1, n):
        s = s + y[r, k, j]
    return s


@kernel_cache
def sinkhorn(n: int, repeat: int, eps: float, backward: bool):
    """Per token an n x n matrix: p = softmax over the last dimension, y = p + eps, then column
    normalisation (y / (sum over rows + eps)), then repeat - 1 times a row and a column normalisation.
    The backward recomputes the forward, keeping the input of every normalisation, and applies each
    normalisation's vector-Jacobian product in reverse: dy = (g - sum(g * z)) / (sum(y) + eps) over the
    normalised group, then the softmax's p * (g - sum(g * p)) over each row."""
    tokens = T.dynamic("num_tokens")
    rows = 16
    steps = 2 * repeat - 1  # normalisations; step s normalises columns when s is even, rows when odd

    def normalize(y_in, y_out, s):
        for r, i, j in T.Parallel(rows, n, n):
            total = _col_sum(y_in, r, j, n) if s % 2 == 0 else _row_sum(y_in, r, i, n)
            y_out[r, i, j] = y_in[r, i, j] / (total + eps)

    def softmax_plus_eps(x, b, p, y):
        for r, i, j in T.Parallel(rows, n, n):
            t = T.min(b * rows + r, tokens - 1)  # rows past the end repeat the last token (not written)
            m = x[t, i, 0]
            for k in range(1, n):
                m = T.max(m, x[t, i, k])
            e = T.exp(x[t, i, 0] - m)
            for k in range(1, n):
                e = e + T.exp(x[t, i, k] - m)
            p[r, i, j] = T.exp(x[t, i, j] - m) / e
            y[r, i, j] = p[r, i, j] + eps

    if not backward:
        @T.prim_func
        def fwd(x: T.Tensor((tokens, n, n), "float32"), out: T.Tensor((tokens, n, n), "float32")):
            with T.Kernel(T.ceildiv(tokens, rows), threads=128) as b:
                p = T.alloc_fragment((rows, n, n), "float32")
                y = T.alloc_fragment((rows, n, n), "float32")
                z = T.alloc_fragment((rows, n, n), "float32")
                softmax_plus_eps(x, b, p, y)
                for s in range(steps):
                    normalize(y, z, s) if s % 2 == 0 else normalize(z, y, s)
                last = z if (steps - 1) % 2 == 0 else y
                for r, i, j in T.Parallel(rows, n, n):
                    if b * rows + r < tokens:
                        out[b * rows + r, i, j] = last[r, i, j]

        return tl_compile(fwd)

    @T.prim_func
    def bwd(grad: T.Tensor((tokens, n, n), "float32"), x: T.Tensor((tokens, n, n), "float32"),
            x_grad: T.Tensor((tokens, n, n), "float32")):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as b:
            p = T.alloc_fragment((rows, n, n), "float32")
            states = [T.alloc_fragment((rows, n, n), "float32") for _ in range(steps + 1)]
            g = T.alloc_fragment((rows, n, n), "float32")
            dg = T.alloc_fragment((rows, n, n), "float32")
            softmax_plus_eps(x, b, p, states[0])
            for s in range(steps):
                normalize(states[s], states[s + 1], s)
            for r, i, j in T.Parallel(rows, n, n):
                g[r, i, j] = grad[T.min(b * rows + r, tokens - 1), i, j]
            for s in reversed(range(steps)):
                y, z = states[s], states[s + 1]
                for r, i, j in T.Parallel(rows, n, n):
                    if s % 2 == 0:  # columns: the group is column j
                        gz = g[r, 0, j] * z[r, 0, j]
                        for k in range(1, n):
                            gz = gz + g[r, k, j] * z[r, k, j]
                        total = _col_sum(y, r, j, n)
                    else:
                        gz = g[r, i, 0] * z[r, i, 0]
                        for k in range(1, n):
                            gz = gz + g[r, i, k] * z[r, i, k]
                        total = _row_sum(y, r, i, n)
                    dg[r, i, j] = (g[r, i, j] - gz) / (total + eps)
                for r, i, j in T.Parallel(rows, n, n):
                    g[r, i, j] = dg[r, i, j]
            for r, i, j in T.Parallel(rows, n, n):
                gp = g[r, i, 0] * p[r, i, 0]
                for k in range(1, n):
                    gp = gp + g[r, i, k] * p[r, i, k]
                if b * rows + r < tokens:
                    x_grad[b * rows + r, i, j] = p[r, i, j] * (g[r, i, j] - gp)

    return tl_compile(bwd)


@kernel_cache
def pre_apply_mix_fwd(mhc_mult: int, hidden: int):
    """o[i, :] = the float32 sum over m (in order) of mix[i, m] * x[i, m, :], rounded to bf16."""
    tokens = T.dynamic("num_tokens")

    @T.prim_func
    def main(x: T.Tensor((tokens, mhc_mult, hidden), "bfloat16"), mix: T.Tensor((tokens, mhc_mult), "float32"),
             o: T.Tensor((tokens, hidden), "bfloat16")):
        with T.Kernel(tokens, threads=128) as i:
            acc = T.alloc_fragment((hidden,), "float32")
            T.clear(acc)
            for m in T.serial(mhc_mult):
                for j in T.Parallel(hidden):
                    acc[j] += mix[i, m] * T.cast(x[i, m, j], "float32")
            for j in T.Parallel(hidden):
                o[i, j] = T.cast(acc[j], "bfloat16")

    return tl_compile(main)


@kernel_cache
def pre_apply_mix_bwd(mhc_mult: int, hidden: int):
    """x_grad[i, m, :] += mix[i, m] * o_grad[i, :] (bf16, in place) and mix_grad[i, m] = the float32
    sum over the hidden dimension of x[i, m, :] * o_grad[i, :]."""
    tokens = T.dynamic("num_tokens")

    @T.prim_func
    def main(o_grad: T.Tensor((tokens, hidden), "bfloat16"), x: T.Tensor((tokens, mhc_mult, hidden), "bfloat16"),
             mix: T.Tensor((tokens, mhc_mult), "float32"), x_grad: T.Tensor((tokens, mhc_mult, hidden), "bfloat16"),
             mix_grad: T.Tensor((tokens, mhc_mult), "float32")):
        with T.Kernel(tokens, threads=128) as i:
            terms = T.alloc_fragment((mhc_mult, hidden), "float32")
            sums = T.alloc_fragment((mhc_mult,), "float32")
            for m, j in T.Parallel(mhc_mult, hidden):
                g = T.cast(o_grad[i, j], "float32")
                terms[m, j] = T.cast(x[i, m, j], "float32") * g
                x_grad[i, m, j] = T.cast(T.cast(x_grad[i, m, j], "float32") + mix[i, m] * g, "bfloat16")
            T.reduce_sum(terms, sums, dim=1)
            for m in T.Parallel(mhc_mult):
                mix_grad[i, m] = sums[m]

    return tl_compile(main)


@kernel_cache
def pre_split_mixes_fwd(mhc_mult: int, post_mult: float, eps: float):
    """z = x * scale[segment] + base over the 2n + n^2 mixes of a token (segments: n pre, n post, n^2
    combination): pre = sigmoid(z) + eps, post = sigmoid(z) * post_mult, comb = z."""
    tokens = T.dynamic("num_tokens")
    n = mhc_mult
    width = 2 * n + n * n
    rows = 32

    @T.prim_func
    def main(x: T.Tensor((tokens, width), "float32"), scale: T.Tensor((3,), "float32"),
             base: T.Tensor((width,), "float32"), pre: T.Tensor((tokens, n), "float32"),
             post: T.Tensor((tokens, n), "float32"), comb: T.Tensor((tokens, n * n), "float32")):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as b:
            for i, j in T.Parallel(rows, n):
                t = b * rows + i
                if t < tokens:
                    pre[t, j] = T.sigmoid(x[t, j] * scale[0] + base[j]) + eps
                    post[t, j] = T.sigmoid(x[t, n + j] * scale[1] + base[n + j]) * post_mult
            for i, j in T.Parallel(rows, n * n):
                t = b * rows + i
                if t < tokens:
                    comb[t, j] = x[t, 2 * n + j] * scale[2] + base[2 * n + j]

    return tl_compile(main)


@kernel_cache
def pre_split_mixes_bwd(mhc_mult: int, post_mult: float):
    """dz = the gradient through each segment's function (sigmoid' for pre and post, post_mult for
    post, 1 for comb); x_grad = dz * scale[segment]. Block b's contiguous run of tokens adds sum(dz * x)
    per segment to scale_partial[b] and dz to base_partial[b] (token order)."""
    tokens = T.dynamic("num_tokens")
    n = mhc_mult
    width = 2 * n + n * n
    blocks = PARTIAL_BLOCKS

    def segment(j):
        return T.if_then_else(j < n, 0, T.if_then_else(j < 2 * n, 1, 2))

    @T.prim_func
    def main(pre_grad: T.Tensor((tokens, n), "float32"), post_grad: T.Tensor((tokens, n), "float32"),
             comb_grad: T.Tensor((tokens, n * n), "float32"), x: T.Tensor((tokens, width), "float32"),
             scale: T.Tensor((3,), "float32"), base: T.Tensor((width,), "float32"),
             x_grad: T.Tensor((tokens, width), "float32"), scale_partial: T.Tensor((blocks, 3), "float32"),
             base_partial: T.Tensor((blocks, width), "float32")):
        with T.Kernel(blocks, threads=128) as b:
            acc_base = T.alloc_fragment((width,), "float32")
            acc_scale = T.alloc_fragment((width,), "float32")
            dz = T.alloc_fragment((width,), "float32")
            T.clear(acc_base)
            T.clear(acc_scale)
            for t in block_tokens(tokens, blocks, b):
                for j in T.Parallel(width):
                    sc = scale[segment(j)]
                    s = T.sigmoid(x[t, j] * sc + base[j])
                    g = T.if_then_else(j < n, pre_grad[t, T.min(j, n - 1)] * s * (1.0 - s),
                                       T.if_then_else(j < 2 * n,
                                                      post_grad[t, T.min(T.max(j - n, 0), n - 1)] * post_mult * s
                                                      * (1.0 - s),
                                                      comb_grad[t, T.min(T.max(j - 2 * n, 0), n * n - 1)]))
                    dz[j] = g
                    x_grad[t, j] = g * sc
                    acc_base[j] += g
                    acc_scale[j] += g * x[t, j]
            for c in range(3):
                lo, hi = (0, n) if c == 0 else ((n, 2 * n) if c == 1 else (2 * n, width))
                total = acc_scale[lo]
                for j in range(lo + 1, hi):
                    total = total + acc_scale[j]
                scale_partial[b, c] = total
            for j in T.Parallel(width):
                base_partial[b, j] = acc_base[j]

    return tl_compile(main)


@kernel_cache
def post_fwd(mhc_mult: int, hidden: int):
    """out[i, n, :] = x[i, :] * post[i, n] + sum over m (in order) of comb[i, m, n] * residual[i, m, :],
    in float32, rounded to bf16."""
    tokens = T.dynamic("num_tokens")
    n = mhc_mult

    @T.prim_func
    def main(x: T.Tensor((tokens, hidden), "bfloat16"), residual: T.Tensor((tokens, n, hidden), "bfloat16"),
             post: T.Tensor((tokens, n), "float32"), comb: T.Tensor((tokens, n, n), "float32"),
             out: T.Tensor((tokens, n, hidden), "bfloat16")):
        with T.Kernel(tokens, threads=128) as i:
            for o, j in T.Parallel(n, hidden):
                acc = T.cast(x[i, j], "float32") * post[i, o]
                for m in range(n):
                    acc = acc + comb[i, m, o] * T.cast(residual[i, m, j], "float32")
                out[i, o, j] = T.cast(acc, "bfloat16")

    return tl_compile(main)


@kernel_cache
def post_bwd(mhc_mult: int, hidden: int):
    """For d_o [tokens, n, hidden]: d_x = sum over n of d_o * post; d_residual[m] = sum over n of
    comb[m, n] * d_o[n] (both bf16); d_post[n] = sum over hidden of d_o[n] * x and d_comb[m, n] = sum
    over hidden of d_o[n] * residual[m] (float32, hidden in chunks of 512, the chunks added in order)."""
    tokens = T.dynamic("num_tokens")
    n = mhc_mult
    chunk = min(512, hidden)
    sums = n * n + n  # d_comb (m, n) entries, then d_post's

    @T.prim_func
    def main(d_o: T.Tensor((tokens, n, hidden), "bfloat16"), x: T.Tensor((tokens, hidden), "bfloat16"),
             residual: T.Tensor((tokens, n, hidden), "bfloat16"), post: T.Tensor((tokens, n), "float32"),
             comb: T.Tensor((tokens, n, n), "float32"), d_x: T.Tensor((tokens, hidden), "bfloat16"),
             d_residual: T.Tensor((tokens, n, hidden), "bfloat16"), d_post: T.Tensor((tokens, n), "float32"),
             d_comb: T.Tensor((tokens, n, n), "float32")):
        with T.Kernel(tokens, threads=128) as i:
            terms = T.alloc_fragment((sums, chunk), "float32")
            part = T.alloc_fragment((sums,), "float32")
            total = T.alloc_fragment((sums,), "float32")
            T.clear(total)
            for j in T.Parallel(hidden):
                acc = T.cast(d_o[i, 0, j], "float32") * post[i, 0]
                for o in range(1, n):
                    acc = acc + T.cast(d_o[i, o, j], "float32") * post[i, o]
                d_x[i, j] = T.cast(acc, "bfloat16")
            for m, j in T.Parallel(n, hidden):
                acc = comb[i, m, 0] * T.cast(d_o[i, 0, j], "float32")
                for o in range(1, n):
                    acc = acc + comb[i, m, o] * T.cast(d_o[i, o, j], "float32")
                d_residual[i, m, j] = T.cast(acc, "bfloat16")
            for c in T.serial(T.ceildiv(hidden, chunk)):
                for s, j in T.Parallel(sums, chunk):
                    col = c * chunk + j
                    live = col < hidden
                    safe = T.min(col, hidden - 1)
                    o = T.if_then_else(s < n * n, s % n, s - n * n)
                    g = T.cast(d_o[i, o, safe], "float32")
                    other = T.if_then_else(s < n * n, T.cast(residual[i, T.min(s // n, n - 1), safe], "float32"),
                                           T.cast(x[i, safe], "float32"))
                    terms[s, j] = T.if_then_else(live, g * other, 0.0)
                T.reduce_sum(terms, part, dim=1)
                for s in T.Parallel(sums):
                    total[s] += part[s]
            for m, o in T.Parallel(n, n):
                d_comb[i, m, o] = total[m * n + o]
            for o in T.Parallel(n):
                d_post[i, o] = total[n * n + o]

    return tl_compile(main)


# ---- mhc_pre_norm_fn: out = (x . fn^T) * rsqrt(sum(x^2) / K + eps) per token (x bf16 [T, K], fn float32) ----

_NORM_ROWS = 64  # tokens per block (16: 1.8x the forward time at 1024 x 28672 x 24)
_NORM_K = 256  # K values per step


@kernel_cache
def pre_norm_fn_fwd(mhc3: int, k_total: int, eps: float):
    """out[t] = mul[t] * rsqrt(sqrsum[t] / K + eps) with mul = x[t] . fn^T (float32 T.gemm over K steps
    of 256, in order) and sqrsum = sum of x[t]^2 (per step, steps added in order); mul and sqrsum are
    written too (the backward's inputs)."""
    tokens = T.dynamic("num_tokens")
    rows, kc = _NORM_ROWS, _NORM_K

    @T.prim_func
    def main(x: T.Tensor((tokens, k_total), "bfloat16"), fn: T.Tensor((mhc3, k_total), "float32"),
             out: T.Tensor((tokens, mhc3), "float32"), mul: T.Tensor((tokens, mhc3), "float32"),
             sqrsum: T.Tensor((tokens,), "float32")):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as b:
            xs = T.alloc_shared((rows, kc), "float32")
            fs = T.alloc_shared((mhc3, kc), "float32")
            sq = T.alloc_fragment((rows, kc), "float32")
            acc = T.alloc_fragment((rows, mhc3), "float32")
            part = T.alloc_fragment((rows,), "float32")
            ssum = T.alloc_fragment((rows,), "float32")
            T.clear(acc)
            T.clear(ssum)
            for c in T.serial(T.ceildiv(k_total, kc)):
                for i, j in T.Parallel(rows, kc):
                    live = (b * rows + i < tokens) & (c * kc + j < k_total)
                    v = T.if_then_else(live, T.cast(x[T.min(b * rows + i, tokens - 1), T.min(c * kc + j, k_total - 1)],
                                                    "float32"), 0.0)
                    xs[i, j] = v
                    sq[i, j] = v * v
                for n, j in T.Parallel(mhc3, kc):
                    fs[n, j] = T.if_then_else(c * kc + j < k_total, fn[n, T.min(c * kc + j, k_total - 1)], 0.0)
                T.gemm(xs, fs, acc, transpose_B=True)
                T.reduce_sum(sq, part, dim=1)
                for i in T.Parallel(rows):
                    ssum[i] += part[i]
            for i, n in T.Parallel(rows, mhc3):
                t = b * rows + i
                if t < tokens:
                    out[t, n] = acc[i, n] * T.rsqrt(ssum[i] / k_total + eps)
                    mul[t, n] = acc[i, n]
            for i in T.Parallel(rows):
                if b * rows + i < tokens:
                    sqrsum[b * rows + i] = ssum[i]

    return tl_compile(main)


@kernel_cache
def pre_norm_fn_bwd_x(mhc3: int, k_total: int, eps: float):
    """With r = rsqrt(sqrsum / K + eps): d_mul = grad * r, d_sqrsum = -sum(grad * mul) * r^3 / (2K);
    x_grad = d_mul . fn + 2 d_sqrsum x (rounded to bf16; added to x_grad_in, which may be zeros), and
    d_mul is written for the weight gradient."""
    tokens = T.dynamic("num_tokens")
    rows, kc = _NORM_ROWS, _NORM_K

    @T.prim_func
    def main(grad: T.Tensor((tokens, mhc3), "float32"), mul: T.Tensor((tokens, mhc3), "float32"),
             sqrsum: T.Tensor((tokens,), "float32"), x: T.Tensor((tokens, k_total), "bfloat16"),
             fn: T.Tensor((mhc3, k_total), "float32"), x_grad: T.Tensor((tokens, k_total), "bfloat16"),
             d_mul: T.Tensor((tokens, mhc3), "float32")):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as b:
            dm = T.alloc_shared((rows, mhc3), "float32")
            fs = T.alloc_shared((mhc3, kc), "float32")
            acc = T.alloc_fragment((rows, kc), "float32")
            ds = T.alloc_fragment((rows,), "float32")
            for i in T.Parallel(rows):
                t = T.min(b * rows + i, tokens - 1)
                r = T.rsqrt(sqrsum[t] / k_total + eps)
                dot = grad[t, 0] * mul[t, 0]
                for n in range(1, mhc3):
                    dot = dot + grad[t, n] * mul[t, n]
                ds[i] = T.if_then_else(b * rows + i < tokens, -0.5 * dot * r * r * r / k_total, 0.0)
            for i, n in T.Parallel(rows, mhc3):
                t = T.min(b * rows + i, tokens - 1)
                live = b * rows + i < tokens
                dm[i, n] = T.if_then_else(live, grad[t, n] * T.rsqrt(sqrsum[t] / k_total + eps), 0.0)
                if live:
                    d_mul[t, n] = dm[i, n]
            for c in T.serial(T.ceildiv(k_total, kc)):
                for n, j in T.Parallel(mhc3, kc):
                    fs[n, j] = T.if_then_else(c * kc + j < k_total, fn[n, T.min(c * kc + j, k_total - 1)], 0.0)
                T.gemm(dm, fs, acc, clear_accum=True)
                for i, j in T.Parallel(rows, kc):
                    t = b * rows + i
                    col = c * kc + j
                    if t < tokens and col < k_total:
                        x_grad[t, col] = T.cast(T.cast(x_grad[t, col], "float32") + acc[i, j]
                                                + 2.0 * ds[i] * T.cast(x[t, col], "float32"), "bfloat16")

    return tl_compile(main)


@kernel_cache
def pre_norm_fn_bwd_fn(mhc3: int, k_total: int):
    """fn_grad[:, chunk] = d_mul^T . x[:, chunk], the tokens in blocks of _NORM_ROWS in order."""
    tokens = T.dynamic("num_tokens")
    rows, kc = _NORM_ROWS, _NORM_K

    @T.prim_func
    def main(d_mul: T.Tensor((tokens, mhc3), "float32"), x: T.Tensor((tokens, k_total), "bfloat16"),
             fn_grad: T.Tensor((mhc3, k_total), "float32")):
        with T.Kernel(T.ceildiv(k_total, kc), threads=128) as c:
            dm = T.alloc_shared((rows, mhc3), "float32")
            xs = T.alloc_shared((rows, kc), "float32")
            acc = T.alloc_fragment((mhc3, kc), "float32")
            T.clear(acc)
            for tb in T.serial(T.ceildiv(tokens, rows)):
                for i, n in T.Parallel(rows, mhc3):
                    dm[i, n] = T.if_then_else(tb * rows + i < tokens, d_mul[T.min(tb * rows + i, tokens - 1), n], 0.0)
                for i, j in T.Parallel(rows, kc):
                    live = (tb * rows + i < tokens) & (c * kc + j < k_total)
                    xs[i, j] = T.if_then_else(live, T.cast(x[T.min(tb * rows + i, tokens - 1),
                                                             T.min(c * kc + j, k_total - 1)], "float32"), 0.0)
                T.gemm(dm, xs, acc, transpose_A=True)
            for n, j in T.Parallel(mhc3, kc):
                if c * kc + j < k_total:
                    fn_grad[n, c * kc + j] = acc[n, j]

    return tl_compile(main)


@kernel_cache
def fn_normw_merge(m: int, k_total: int):
    """out = fn * normw (per column)."""

    @T.prim_func
    def main(fn: T.Tensor((m, k_total), "float32"), normw: T.Tensor((k_total,), "float32"),
             out: T.Tensor((m, k_total), "float32")):
        with T.Kernel(m, threads=128) as i:
            for j in T.Parallel(k_total):
                out[i, j] = fn[i, j] * normw[j]

    return tl_compile(main)


@kernel_cache
def fn_normw_merge_bwd(m: int, k_total: int):
    """fn_grad = g * normw; normw_grad = the sum over rows (in order) of g * fn."""
    cols = 512

    @T.prim_func
    def main(fn: T.Tensor((m, k_total), "float32"), normw: T.Tensor((k_total,), "float32"),
             g: T.Tensor((m, k_total), "float32"), fn_grad: T.Tensor((m, k_total), "float32"),
             normw_grad: T.Tensor((k_total,), "float32")):
        with T.Kernel(T.ceildiv(k_total, cols), threads=128) as c:
            acc = T.alloc_fragment((cols,), "float32")
            T.clear(acc)
            for i in T.serial(m):
                for j in T.Parallel(cols):
                    col = c * cols + j
                    if col < k_total:
                        fn_grad[i, col] = g[i, col] * normw[col]
                        acc[j] += g[i, col] * fn[i, col]
            for j in T.Parallel(cols):
                if c * cols + j < k_total:
                    normw_grad[c * cols + j] = acc[j]

    return tl_compile(main)
