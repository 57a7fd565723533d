"""Tile-language kernels of tessera.tile_kernels.modeling.mhc.ops (expand, head mix, Sinkhorn)."""

from .. import language as T
from ..tl import compile as tl_compile
from ._kernel_cache import kernel_cache

# Blocks of the backward kernels' parameter-gradient partials: a constant, so the sums do not depend
# on the machine or the thread count (the caller adds the partial rows in order).
PARTIAL_BLOCKS = 32


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
            per_block = T.ceildiv(tokens, blocks)
            for t in T.serial(T.min(per_block * b, tokens), T.min(per_block * (b + 1), tokens)):
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
