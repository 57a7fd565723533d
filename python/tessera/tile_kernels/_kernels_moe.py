"""Tile-language kernels of tessera.tile_kernels.moe (the public functions live in moe/).

Conventions as in _kernels_quant: memoized factories, every parameter given by the caller, token
counts T.dynamic. Selection kernels pick by repeated max passes over a float32 fragment (ties go to the
smaller index); counting kernels build a per-block histogram and add it to the output with integer
atomics (exact and order-independent, so results do not depend on the thread count).
"""

from .. import language as T
from ..tl import compile as tl_compile
from ._kernel_cache import kernel_cache

_ROWS = 16  # tokens per block of the row-wise kernels


def _even_cols(hidden: int, most: int) -> int:
    """Columns per block: ``hidden`` split into equal blocks of at most ``most`` (rounded up to whole
    16-lane vectors), so no block is a mostly masked tail (7168 -> 4 x 1792, not 3.5 x 2048)."""
    per_block = -(-hidden // -(-hidden // most))
    return min(hidden, -(-per_block // 16) * 16)


@kernel_cache
def topk_select(num_experts: int, num_topk: int, idx_dtype: str = "int64"):
    """Indices of the num_topk largest scores of each row, descending, smaller index first on ties."""
    tokens = T.dynamic("num_tokens")
    inf = T.infinity("float32")

    @T.prim_func
    def main(scores: T.Tensor((tokens, num_experts), "float32"), topk_idx: T.Tensor((tokens, num_topk), idx_dtype)):
        with T.Kernel(T.ceildiv(tokens, _ROWS), threads=128) as bm:
            vals = T.alloc_fragment((_ROWS, num_experts), "float32")
            live = T.alloc_fragment((_ROWS, num_experts), "float32")
            taken = T.alloc_fragment((_ROWS, num_experts), "int32")
            cand = T.alloc_fragment((_ROWS, num_experts), "int32")
            best = T.alloc_fragment((_ROWS,), "float32")
            pick = T.alloc_fragment((_ROWS,), "int32")
            T.copy(scores[bm * _ROWS, 0], vals)
            T.clear(taken)
            for r in T.serial(num_topk):
                for i, j in T.Parallel(_ROWS, num_experts):
                    live[i, j] = T.if_then_else(taken[i, j] == 1, -inf, vals[i, j])
                T.reduce_max(live, best, dim=1)
                # the smallest untaken index holding the maximum (also when every untaken value is -inf)
                for i, j in T.Parallel(_ROWS, num_experts):
                    cand[i, j] = T.if_then_else(taken[i, j] == 0 and live[i, j] == best[i], j, num_experts)
                T.reduce_min(cand, pick, dim=1)
                for i, j in T.Parallel(_ROWS, num_experts):
                    taken[i, j] = T.if_then_else(j == pick[i], 1, taken[i, j])
                for i in T.serial(_ROWS):
                    topk_idx[bm * _ROWS + i, r] = T.cast(pick[i], idx_dtype)

    return tl_compile(main)


@kernel_cache
def group_topk_sum(num_groups: int, per_group: int, num_topk_sum: int):
    """Sum of the num_topk_sum (1 or 2) largest scores of each group: [tokens, groups] float32."""
    tokens = T.dynamic("num_tokens")

    @T.prim_func
    def main(scores: T.Tensor((tokens, num_groups * per_group), "float32"),
             group_scores: T.Tensor((tokens, num_groups), "float32")):
        with T.Kernel(T.ceildiv(tokens, _ROWS), threads=128) as bm:
            vals = T.alloc_fragment((_ROWS * num_groups, per_group), "float32")
            rest = T.alloc_fragment((_ROWS * num_groups, per_group), "float32")
            first = T.alloc_fragment((_ROWS * num_groups,), "float32")
            count = T.alloc_fragment((_ROWS * num_groups,), "float32")
            second = T.alloc_fragment((_ROWS * num_groups,), "float32")
            for i, j in T.Parallel(_ROWS * num_groups, per_group):
                vals[i, j] = scores[bm * _ROWS + i // num_groups, (i % num_groups) * per_group + j]
            T.reduce_max(vals, first, dim=1)
            if num_topk_sum == 1:
                for i in T.Parallel(_ROWS * num_groups):
                    group_scores[bm * _ROWS + i // num_groups, i % num_groups] = first[i]
            else:
                # the second largest is the maximum again when it occurs twice
                for i, j in T.Parallel(_ROWS * num_groups, per_group):
                    rest[i, j] = T.if_then_else(vals[i, j] == first[i], 1.0, 0.0)
                T.reduce_sum(rest, count, dim=1)
                for i, j in T.Parallel(_ROWS * num_groups, per_group):
                    rest[i, j] = T.if_then_else(vals[i, j] == first[i], -T.infinity("float32"), vals[i, j])
                T.reduce_max(rest, second, dim=1)
                for i in T.Parallel(_ROWS * num_groups):
                    top2 = T.if_then_else(count[i] >= 2.0, first[i], second[i])
                    group_scores[bm * _ROWS + i // num_groups, i % num_groups] = first[i] + top2

    return tl_compile(main)


@kernel_cache
def histogram(num_topk: int, num_bins: int, idx_dtype: str):
    """counts[b] += number of entries == b (negative entries and entries >= num_bins are skipped)."""
    tokens = T.dynamic("num_tokens")
    rows = 256

    @T.prim_func
    def main(idx: T.Tensor((tokens, num_topk), idx_dtype), counts: T.Tensor((num_bins,), "int32")):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as bm:
            hist = T.alloc_fragment((num_bins,), "int32")
            T.clear(hist)
            for i in T.serial(rows):
                if bm * rows + i < tokens:
                    for k in T.serial(num_topk):
                        e = T.cast(idx[bm * rows + i, k], "int32")
                        if e >= 0 and e < num_bins:
                            hist[e] = hist[e] + 1
            for b in T.serial(num_bins):
                if hist[b] > 0:
                    T.atomic_add(counts[b], hist[b])

    return tl_compile(main)


@kernel_cache
def frequency(num_experts: int):
    """f[e] = float32(count[e]) * num_experts / float32(num_tokens * num_aux_topk)."""
    @T.prim_func
    def main(counts: T.Tensor((num_experts,), "int32"), f: T.Tensor((num_experts,), "float32"),
             denominator: T.float32):
        with T.Kernel(1, threads=128) as _:
            for e in T.Parallel(num_experts):
                f[e] = T.cast(counts[e], "float32") * T.cast(num_experts, "float32") / denominator

    return tl_compile(main)


@kernel_cache
def mask_by_tp(num_topk: int, idx_dtype: str):
    tokens = T.dynamic("num_tokens")
    rows = 64

    @T.prim_func
    def main(indices: T.Tensor((tokens, num_topk), idx_dtype), out: T.Tensor((tokens, num_topk), idx_dtype),
             per_gpu: T.int64, per_dp: T.int64, num_tp_ranks: T.int64, tp_rank: T.int64):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as bm:
            for i, k in T.Parallel(rows, num_topk):
                v = T.cast(indices[bm * rows + i, k], "int64")
                invalid = v < 0 or (v // per_gpu) % num_tp_ranks != tp_rank
                local = v - tp_rank * per_gpu
                remapped = local - (local // per_dp) * (per_dp - per_gpu)
                out[bm * rows + i, k] = T.cast(T.if_then_else(invalid or remapped < 0, -1, remapped), idx_dtype)

    return tl_compile(main)


@kernel_cache
def normalize(num_topk: int):
    """denominator = 1e-20 + w[0] + w[1] + ... (this order), normalized = w / denominator."""
    tokens = T.dynamic("num_tokens")
    rows = 256

    @T.prim_func
    def main(w: T.Tensor((tokens, num_topk), "float32"), denominator: T.Tensor((tokens,), "float32"),
             normalized: T.Tensor((tokens, num_topk), "float32")):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as bm:
            den = T.alloc_fragment((rows,), "float32")
            T.fill(den, 1e-20)
            for k in T.serial(num_topk):
                for i in T.Parallel(rows):
                    den[i] = den[i] + w[bm * rows + i, k]
            for i in T.Parallel(rows):
                denominator[bm * rows + i] = den[i]
            for i, k in T.Parallel(rows, num_topk):
                normalized[bm * rows + i, k] = w[bm * rows + i, k] / den[i]

    return tl_compile(main)


@kernel_cache
def unique_in_rows(num_topk: int, idx_dtype: str):
    """Every repeat of a value earlier in its row becomes -1 (in place)."""
    tokens = T.dynamic("num_tokens")
    rows = 64

    @T.prim_func
    def main(idx: T.Tensor((tokens, num_topk), idx_dtype)):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as bm:
            row = T.alloc_fragment((rows, num_topk), "int64")
            dup = T.alloc_fragment((rows, num_topk), "int32")
            T.copy(idx[bm * rows, 0], row)
            T.clear(dup)
            for i, k in T.Parallel(rows, num_topk):
                for j in T.serial(k):
                    if row[i, j] == row[i, k]:
                        dup[i, k] = 1
            for i, k in T.Parallel(rows, num_topk):
                if dup[i, k] == 1:
                    idx[bm * rows + i, k] = T.cast(-1, idx_dtype)

    return tl_compile(main)


@kernel_cache
def fused_mapping(num_experts: int, num_topk: int, alignment: int):
    """Expert-major layout of the (token, k) pairs: expert e owns align(count_e, alignment) positions from
    expert_start[e], filled in (token, k) order, padding -1 in the three position maps. One block scans
    the pairs (two passes: count, then place); the -1 fill of the position maps runs first in parallel."""
    tokens = T.dynamic("num_tokens")
    slots = T.dynamic("num_expanded_tokens")
    fill = 4096

    @T.prim_func
    def main(topk_idx: T.Tensor((tokens, num_topk), "int64"), pos_to_expert: T.Tensor((slots,), "int32"),
             pos_to_token: T.Tensor((slots,), "int32"), pos_to_token_topk: T.Tensor((slots,), "int32"),
             token_topk_to_pos: T.Tensor((tokens, num_topk), "int32"), expert_start: T.Tensor((num_experts,), "int32"),
             expert_end: T.Tensor((num_experts,), "int32"), tokens_per_expert: T.Tensor((num_experts,), "int32")):
        with T.Kernel(T.ceildiv(slots, fill), threads=128) as bx:
            for i in T.Parallel(fill):
                pos_to_expert[bx * fill + i] = -1
                pos_to_token[bx * fill + i] = -1
                pos_to_token_topk[bx * fill + i] = -1
        with T.Kernel(1, threads=128) as _:
            count = T.alloc_fragment((num_experts,), "int32")
            cursor = T.alloc_fragment((num_experts,), "int32")
            T.clear(count)
            for t in T.serial(tokens):
                for k in T.serial(num_topk):
                    e = T.cast(topk_idx[t, k], "int32")
                    if e >= 0 and e < num_experts:
                        count[e] = count[e] + 1
            start = T.alloc_var("int32", init=0)
            for e in T.serial(num_experts):
                padded = (count[e] + alignment - 1) // alignment * alignment
                cursor[e] = start
                expert_start[e] = start
                expert_end[e] = start + padded
                tokens_per_expert[e] = padded
                start = start + padded
            for t in T.serial(tokens):
                for k in T.serial(num_topk):
                    e = T.cast(topk_idx[t, k], "int32")
                    if e >= 0 and e < num_experts:
                        p = cursor[e]
                        cursor[e] = p + 1
                        token_topk_to_pos[t, k] = p
                        if p < slots:
                            pos_to_expert[p] = e
                            pos_to_token[p] = t
                            pos_to_token_topk[p] = t * num_topk + k
                    else:
                        token_topk_to_pos[t, k] = -1

    return tl_compile(main)


@kernel_cache
def expand_rows(hidden: int, num_topk: int, dtype: str, map_dtype: str):
    """out[pos] = x[t] for every (t, k) with pos = token_topk_to_pos[t, k] >= 0; rows whose
    pos_to_expert is negative are zero."""
    tokens = T.dynamic("num_tokens")
    slots = T.dynamic("num_expanded_tokens")
    cols = min(hidden, 4096)

    @T.prim_func
    def main(x: T.Tensor((tokens, hidden), dtype), token_topk_to_pos: T.Tensor((tokens, num_topk), map_dtype),
             pos_to_expert: T.Tensor((slots,), map_dtype), out: T.Tensor((slots, hidden), dtype)):
        with T.Kernel(T.ceildiv(hidden, cols), slots, threads=128) as (bc, p):
            if pos_to_expert[p] < 0:
                for j in T.Parallel(cols):
                    out[p, bc * cols + j] = T.cast(0, dtype)
        with T.Kernel(T.ceildiv(hidden, cols), tokens, threads=128) as (bc, t):
            for k in T.serial(num_topk):
                p = token_topk_to_pos[t, k]
                if p >= 0:
                    for j in T.Parallel(cols):
                        out[p, bc * cols + j] = x[t, bc * cols + j]

    return tl_compile(main)


@kernel_cache
def expand_sf_rows(sf_cols: int, num_topk: int, dtype: str, map_dtype: str, in_col: bool, out_col: bool):
    """Factor rows of expand_to_fused_with_sf (layouts row-major or column-major storages)."""
    tokens = T.dynamic("num_tokens")
    slots = T.dynamic("num_expanded_tokens")
    in_shape = (sf_cols, T.dynamic("in_cols")) if in_col else (tokens, sf_cols)
    out_shape = (sf_cols, T.dynamic("out_cols")) if out_col else (slots, sf_cols)

    def at(buf, col_major, r, c):
        return buf[c, r] if col_major else buf[r, c]

    @T.prim_func
    def main(sf: T.Tensor(in_shape, dtype), token_topk_to_pos: T.Tensor((tokens, num_topk), map_dtype),
             pos_to_expert: T.Tensor((slots,), map_dtype), out: T.Tensor(out_shape, dtype)):
        with T.Kernel(slots, threads=128) as p:
            if pos_to_expert[p] < 0:
                for c in T.serial(sf_cols):
                    if out_col:
                        out[c, p] = T.cast(0, dtype)
                    else:
                        out[p, c] = T.cast(0, dtype)
        with T.Kernel(tokens, threads=128) as t:
            for k in T.serial(num_topk):
                p = token_topk_to_pos[t, k]
                if p >= 0:
                    for c in T.serial(sf_cols):
                        if out_col:
                            out[c, p] = at(sf, in_col, t, c)
                        else:
                            out[p, c] = at(sf, in_col, t, c)

    return tl_compile(main)


@kernel_cache
def reduce_rows(hidden: int, num_topk: int, dtype: str, out_dtype: str, map_dtype: str, weighted: bool,
                row_sf: bool, out_scale: bool):
    """out[t] = cast(scale * fma-chain over k of x[pos_k] * s_k), s_k = w[t, k] (or 1) times x_sf[pos_k],
    accumulated in float32 from 0 in k order, skipping pos_k < 0."""
    tokens = T.dynamic("num_tokens")
    slots = T.dynamic("num_expanded_tokens")
    # whole rows up to 8192 values: each expert row is then read in one pass (blocks of 2048 columns
    # made 4 short reads of each row and ran 1.13x longer at hidden 7168)
    cols = _even_cols(hidden, 8192)

    @T.prim_func
    def main(x: T.Tensor((slots, hidden), dtype), x_sf: T.Tensor((slots,), "float32"),
             w: T.Tensor((tokens, num_topk), "float32"), token_topk_to_pos: T.Tensor((tokens, num_topk), map_dtype),
             scale: T.Tensor((1,), "float32"), out: T.Tensor((tokens, hidden), out_dtype)):
        with T.Kernel(T.ceildiv(hidden, cols), tokens, threads=128) as (bc, t):
            acc = T.alloc_fragment((cols,), "float32")
            T.clear(acc)
            for k in T.serial(num_topk):
                p = token_topk_to_pos[t, k]
                if p >= 0:
                    s = (w[t, k] if weighted else T.cast(1.0, "float32")) * (x_sf[p] if row_sf else 1.0)
                    for j in T.Parallel(cols):
                        acc[j] = T.fma(T.cast(x[p, bc * cols + j], "float32"), s, acc[j])
            for j in T.Parallel(cols):
                out[t, bc * cols + j] = T.cast(acc[j] * scale[0] if out_scale else acc[j], out_dtype)

    return tl_compile(main)


SCORING = ("sigmoid", "sqrtsoftplus", "softmax")


@T.macro
def _score(x, scoring):
    """The routing score of a logit (sigmoid or sqrt(softplus)); softmax is normalised by the caller."""
    if scoring == "sigmoid":
        return 1.0 / (1.0 + T.exp(-x))
    if scoring == "sqrtsoftplus":
        return T.sqrt(T.if_then_else(x > 20.0, x, T.log(1.0 + T.exp(x))))
    return T.exp(x)


@T.macro
def _take_topk(live, taken, cand, best, pick, rows, n, k, on_pick):
    """k passes of: maximum of the untaken live values, smallest index holding it, mark it taken;
    on_pick(r) stores pick[i] for pass r."""
    T.clear(taken)
    for r in T.serial(k):
        for i, j in T.Parallel(rows, n):
            cand[i, j] = T.if_then_else(taken[i, j] == 1, -T.infinity("float32"), live[i, j])
        T.reduce_max(cand, best, dim=1)
        for i, j in T.Parallel(rows, n):
            cand[i, j] = T.if_then_else(taken[i, j] == 0 and cand[i, j] == best[i], T.cast(j, "float32"),
                                        T.cast(n, "float32"))
        T.reduce_min(cand, pick, dim=1)
        for i, j in T.Parallel(rows, n):
            taken[i, j] = T.if_then_else(T.cast(j, "float32") == pick[i], 1, taken[i, j])
        on_pick(r)


@kernel_cache
def top2_sum_gate(scoring: str, experts: int, num_topk: int, num_topk_groups: int, num_groups: int,
                  num_shared: int, has_mask: bool, has_fix: bool, has_unmapped: bool, has_physical: bool,
                  map_cols: int):
    """Scores, optional group restriction (groups ranked by the sum of their two best biased scores),
    top-k of the biased scores, weights normalised to routed_scaling_factor, shared experts appended,
    logical -> physical mapping and EP / TP masking; see moe._gate for the full contract."""
    tokens = T.dynamic("num_tokens")
    rows = 8
    out_k = num_topk + num_shared
    grouped = num_groups != num_topk_groups
    per_group = experts // num_groups if grouped else 1
    logical = experts + num_shared

    @T.prim_func
    def main(logits: T.Tensor((tokens, experts), "float32"), bias: T.Tensor((experts,), "float32"),
             mask: T.Tensor((tokens,), "bool"), fix_mask: T.Tensor((tokens,), "bool"),
             to_physical: T.Tensor((logical, map_cols), "int32"), logical_count: T.Tensor((logical,), "int32"),
             topk_idx: T.Tensor((tokens, out_k), "int64"), unmapped: T.Tensor((tokens, num_topk), "int64"),
             topk_weights: T.Tensor((tokens, out_k), "float32"), num_extra: T.int32, scaling: T.float32,
             ep_rank: T.int32, num_ep_ranks: T.int32, tp_rank: T.int32, num_tp_ranks: T.int32):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as bm:
            r0 = bm * rows
            raw = T.alloc_fragment((rows, experts), "float32")
            score = T.alloc_fragment((rows, experts), "float32")
            live = T.alloc_fragment((rows, experts), "float32")
            taken = T.alloc_fragment((rows, experts), "int32")
            cand = T.alloc_fragment((rows, experts), "float32")
            best = T.alloc_fragment((rows,), "float32")
            pick = T.alloc_fragment((rows,), "float32")
            chosen = T.alloc_fragment((rows, out_k), "int32")
            weight = T.alloc_fragment((rows, out_k), "float32")
            total = T.alloc_fragment((rows,), "float32")
            active = T.alloc_fragment((rows,), "int32")
            fixed = T.alloc_fragment((rows,), "int32")
            T.copy(logits[r0, 0], raw)
            for i in T.serial(rows):
                active[i] = T.if_then_else(r0 + i < tokens and (not has_mask or mask[r0 + i]), 1, 0)
                fixed[i] = T.if_then_else(has_fix and r0 + i < tokens and fix_mask[r0 + i], 1, 0)
            if scoring == "softmax":
                T.reduce_max(raw, best, dim=1)
                for i, j in T.Parallel(rows, experts):
                    score[i, j] = T.exp(raw[i, j] - best[i])
                T.reduce_sum(score, total, dim=1)
                for i, j in T.Parallel(rows, experts):
                    score[i, j] = score[i, j] / total[i]
                    live[i, j] = raw[i, j] + bias[j]
            else:
                for i, j in T.Parallel(rows, experts):
                    score[i, j] = _score(raw[i, j], scoring)
                    live[i, j] = score[i, j] + bias[j]
            if grouped:
                gv = T.alloc_fragment((rows * num_groups, per_group), "float32")
                g1 = T.alloc_fragment((rows * num_groups,), "float32")
                g2 = T.alloc_fragment((rows * num_groups,), "float32")
                gn = T.alloc_fragment((rows * num_groups,), "float32")
                gsum = T.alloc_fragment((rows, num_groups), "float32")
                gtaken = T.alloc_fragment((rows, num_groups), "int32")
                gcand = T.alloc_fragment((rows, num_groups), "float32")
                for i, j in T.Parallel(rows * num_groups, per_group):
                    gv[i, j] = live[i // num_groups, (i % num_groups) * per_group + j]
                T.reduce_max(gv, g1, dim=1)
                for i, j in T.Parallel(rows * num_groups, per_group):
                    gv[i, j] = T.if_then_else(gv[i, j] == g1[i], 1.0, 0.0)
                T.reduce_sum(gv, gn, dim=1)
                for i, j in T.Parallel(rows * num_groups, per_group):
                    gv[i, j] = T.if_then_else(live[i // num_groups, (i % num_groups) * per_group + j] == g1[i],
                                              -T.infinity("float32"),
                                              live[i // num_groups, (i % num_groups) * per_group + j])
                T.reduce_max(gv, g2, dim=1)
                for i, g in T.Parallel(rows, num_groups):
                    top = g1[i * num_groups + g]
                    gsum[i, g] = top + T.if_then_else(gn[i * num_groups + g] >= 2.0, top, g2[i * num_groups + g])
                _take_topk(gsum, gtaken, gcand, best, pick, rows, num_groups, num_topk_groups, lambda r: None)
                for i, j in T.Parallel(rows, experts):
                    live[i, j] = T.if_then_else(gtaken[i, j // per_group] == 1, live[i, j], -T.infinity("float32"))

            def store_pick(r):
                for i in T.serial(rows):
                    chosen[i, r] = T.cast(pick[i], "int32")
            _take_topk(live, taken, cand, best, pick, rows, experts, num_topk, store_pick)
            if has_fix:
                for i, k in T.Parallel(rows, num_topk):
                    if fixed[i] == 1:
                        chosen[i, k] = T.cast(unmapped[r0 + i, k], "int32")
            T.clear(total)
            for k in T.serial(num_topk):
                for i in T.serial(rows):
                    weight[i, k] = score[i, T.max(chosen[i, k], 0)]
                    total[i] = total[i] + weight[i, k]
            for i, k in T.Parallel(rows, num_topk):
                weight[i, k] = weight[i, k] / T.max(total[i], 1e-20) * scaling
            for i, s in T.Parallel(rows, num_shared):
                chosen[i, num_topk + s] = experts + s
                weight[i, num_topk + s] = 1.0
            if has_unmapped:
                for i, k in T.Parallel(rows, num_topk):
                    unmapped[r0 + i, k] = T.cast(T.if_then_else(active[i] == 1, chosen[i, k], -1), "int64")
            per_rank = (experts + num_extra) // num_ep_ranks
            per_dp = per_rank * num_tp_ranks
            for i, k in T.Parallel(rows, out_k):
                e = chosen[i, k]
                if has_physical:
                    # max(count, 1): masked vector lanes compute the modulo too and must not divide by 0
                    dup = T.cast((T.cast(ep_rank, "int64") + T.cast(r0 + i, "int64") * 23333)
                                 % T.cast(T.max(logical_count[T.max(e, 0)], 1), "int64"), "int32")
                    e = T.if_then_else(e >= 0, to_physical[T.max(e, 0), dup], e)
                off_rank = e >= 0 and (e // per_rank) % num_tp_ranks != tp_rank
                local = e - tp_rank * per_rank
                remapped = local - (local // per_dp) * (per_dp - per_rank)
                final = T.if_then_else(e < 0 or off_rank or remapped < 0, -1, remapped)
                topk_idx[r0 + i, k] = T.cast(T.if_then_else(active[i] == 1, final, -1), "int64")
                topk_weights[r0 + i, k] = T.if_then_else(active[i] == 1, weight[i, k], 0.0)

    return tl_compile(main)
