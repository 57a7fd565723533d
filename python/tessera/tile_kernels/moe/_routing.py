"""MoE routing helpers with TileKernels' names and arguments: selection (topk_gate,
topk_sum_and_topk_group_idx), counting (group_count, aux_fi), index rewriting (mask_indices_by_tp,
inplace_unique_group_indices), normalize_weight, and the fused expert-major layout (get_fused_mapping,
expand_to_fused(_with_sf), reduce_fused). Inputs are torch CPU tensors or numpy arrays; outputs follow
the input's kind. All checks run before any kernel writes.
"""
from .. import _arrays as A
from .. import _kernels_moe as K
from .. import _sf_layout as L

_INDEX = ("int64", "int32")


def _index_2d(fn, arg, x):
    A.require_array(fn, arg, x, _INDEX, ndim=2)
    if not A.is_contiguous(x):
        raise A.invalid_argument(fn, arg, "must be contiguous")
    return A.dtype_name(x)


def topk_gate(scores, num_topk):
    """Indices (int64 [tokens, num_topk]) of each row's num_topk largest float32 scores, in descending
    order; equal scores take the smaller index first."""
    fn = "topk_gate"
    A.require_array(fn, "scores", scores, ("float32",), ndim=2)
    experts = scores.shape[1]
    k = A.require_int(fn, "num_topk", num_topk, minimum=1)
    if k > experts:
        raise A.invalid_argument(fn, "num_topk", f"must be <= num_experts ({experts}), got {k}")
    out = A.alloc(scores, (scores.shape[0], k), "int64")
    if scores.shape[0]:
        K.topk_select(experts, k).call_all([scores, out])
    return out


def topk_sum_and_topk_group_idx(scores, num_topk_sum, num_topk_groups):
    """Group indices (int64 [tokens, num_topk_groups]) ranked by the sum of each group's num_topk_sum (1 or
    2) largest scores; scores float32 [tokens, groups, experts_per_group]."""
    fn = "topk_sum_and_topk_group_idx"
    A.require_array(fn, "scores", scores, ("float32",), ndim=3)
    if not A.is_contiguous(scores):
        raise A.invalid_argument(fn, "scores", "must be contiguous")
    tokens, groups, per_group = scores.shape
    n_sum = A.require_int(fn, "num_topk_sum", num_topk_sum, allowed=(1, 2))
    if n_sum > per_group:
        raise A.invalid_argument(fn, "num_topk_sum", f"must be <= experts per group ({per_group}), got {n_sum}")
    n_groups = A.require_int(fn, "num_topk_groups", num_topk_groups, minimum=1)
    if n_groups > groups:
        raise A.invalid_argument(fn, "num_topk_groups", f"must be <= num_groups ({groups}), got {n_groups}")
    out = A.alloc(scores, (tokens, n_groups), "int64")
    if tokens:
        group_scores = A.alloc(scores, (tokens, groups), "float32")
        K.group_topk_sum(groups, per_group, n_sum).call_all([scores.reshape(tokens, groups * per_group),
                                                              group_scores])
        K.topk_select(groups, n_groups).call_all([group_scores, out])
    return out


def _count(fn, arg, idx, num_bins):
    dtype = _index_2d(fn, arg, idx)
    counts = A.alloc(idx, (num_bins,), "int32", zero=True)
    if idx.shape[0] and idx.shape[1]:
        K.histogram(idx.shape[1], num_bins, dtype).call_all([idx, counts])
    return counts


def group_count(group_idx, num_groups):
    """int32 [num_groups]: how many entries of group_idx [tokens, topk] equal each group (negatives skipped)."""
    n = A.require_int("group_count", "num_groups", num_groups, minimum=1)
    return _count("group_count", "group_idx", group_idx, n)


def aux_fi(topk_idx, num_experts, num_aux_topk):
    """float32 [num_experts]: count[e] * num_experts / (num_tokens * num_aux_topk) (0 when no tokens)."""
    fn = "aux_fi"
    n = A.require_int(fn, "num_experts", num_experts, minimum=1)
    aux = A.require_int(fn, "num_aux_topk", num_aux_topk, minimum=1)
    counts = _count(fn, "topk_idx", topk_idx, n)
    f = A.alloc(topk_idx, (n,), "float32", zero=True)
    if topk_idx.shape[0]:
        K.frequency(n).call_all([counts, f, float(topk_idx.shape[0] * aux)])
    return f


def mask_indices_by_tp(indices, n, num_ep_ranks, tp_rank, num_tp_ranks):
    """Keeps the experts of TP rank tp_rank, renumbered to its local range; the rest become -1."""
    fn = "mask_indices_by_tp"
    dtype = _index_2d(fn, "indices", indices)
    n = A.require_int(fn, "n", n, minimum=1)
    ep = A.require_int(fn, "num_ep_ranks", num_ep_ranks, minimum=1)
    tp_n = A.require_int(fn, "num_tp_ranks", num_tp_ranks, minimum=1)
    tp = A.require_int(fn, "tp_rank", tp_rank, minimum=0)
    if tp >= tp_n:
        raise A.invalid_argument(fn, "tp_rank", f"must be < num_tp_ranks ({tp_n}), got {tp}")
    if n % ep:
        raise A.invalid_argument(fn, "n", f"must be a multiple of num_ep_ranks ({ep}), got {n}")
    per_gpu = n // ep
    out = A.alloc(indices, indices.shape, dtype)
    if indices.shape[0] and indices.shape[1]:
        K.mask_by_tp(indices.shape[1], dtype).call_all([indices, out, per_gpu, tp_n * per_gpu, tp_n, tp])
    return out


def normalize_weight(topk_weights):
    """(denominator [tokens], weights / denominator): denominator = 1e-20 + w[:, 0] + w[:, 1] + ..."""
    fn = "normalize_weight"
    A.require_array(fn, "topk_weights", topk_weights, ("float32",), ndim=2)
    if not A.is_contiguous(topk_weights):
        raise A.invalid_argument(fn, "topk_weights", "must be contiguous")
    tokens, k = topk_weights.shape
    den = A.alloc(topk_weights, (tokens,), "float32")
    out = A.alloc(topk_weights, (tokens, k), "float32")
    if tokens:
        K.normalize(k).call_all([topk_weights, den, out])
    return den, out


def inplace_unique_group_indices(group_indices, num_groups):
    """Sets every repeat of a group index within its row to -1, keeping the first (in place; None)."""
    fn = "inplace_unique_group_indices"
    dtype = _index_2d(fn, "group_indices", group_indices)
    n = A.require_int(fn, "num_groups", num_groups, minimum=1)
    if n > 128:
        raise A.invalid_argument(fn, "num_groups", f"must be <= 128, got {n}")
    if group_indices.shape[0] and group_indices.shape[1] > 1:
        K.unique_in_rows(group_indices.shape[1], dtype).call_all([group_indices])


def get_fused_mapping(topk_idx, num_experts, num_expanded_tokens, alignment, force_no_sync=False):
    """Expert-major layout of the (token, k) pairs (TileKernels' 8-tuple): pos_to_expert, pos_to_token,
    pos_to_token_topk ([num_expanded_tokens] int32, -1 on padding), token_topk_to_pos [tokens, topk],
    expert_start, expert_end, num_tokens_per_expert (aligned counts, int32 [num_experts]) and their list
    (when num_expanded_tokens is 0 and not force_no_sync, which also trims the maps to the used length).
    Within an expert, pairs are in (token, k) order."""
    fn = "get_fused_mapping"
    A.require_array(fn, "topk_idx", topk_idx, ("int64",), ndim=2)
    if not A.is_contiguous(topk_idx):
        raise A.invalid_argument(fn, "topk_idx", "must be contiguous")
    n = A.require_int(fn, "num_experts", num_experts, minimum=1)
    align = A.require_int(fn, "alignment", alignment, minimum=1)
    slots = A.require_int(fn, "num_expanded_tokens", num_expanded_tokens, minimum=0)
    tokens, k = topk_idx.shape
    sync = slots == 0 and not force_no_sync
    if sync:
        slots = (tokens * k + (align - 1) * n) // align * align
    maps = [A.alloc(topk_idx, (slots,), "int32") for _ in range(3)]
    token_topk_to_pos = A.alloc(topk_idx, (tokens, k), "int32")
    per_expert = [A.alloc(topk_idx, (n,), "int32") for _ in range(3)]
    K.fused_mapping(n, k, align).call_all([topk_idx, *maps, token_topk_to_pos, *per_expert])
    counts = []
    if sync:
        counts = [int(c) for c in per_expert[2].tolist()]
        used = sum(counts)
        maps = [m[:used] for m in maps]
    return (*maps, token_topk_to_pos, *per_expert, counts)


def _check_maps(fn, x_rows_kind, token_topk_to_pos, pos_to_expert):
    map_dtype = _index_2d(fn, "token_topk_to_pos", token_topk_to_pos)
    A.require_array(fn, "pos_to_expert", pos_to_expert, (map_dtype,), ndim=1)
    A.check_same_kind(fn, x=x_rows_kind, token_topk_to_pos=token_topk_to_pos, pos_to_expert=pos_to_expert)
    return map_dtype


def expand_to_fused(x, token_topk_to_pos, pos_to_expert):
    """out [len(pos_to_expert), hidden]: out[token_topk_to_pos[t, k]] = x[t]; rows with a negative
    pos_to_expert are zero (rows no pair maps to and whose pos_to_expert is >= 0 are left unwritten)."""
    fn = "expand_to_fused"
    A.require_array(fn, "x", x, ("bfloat16", "float32", "float8_e4m3fn"), ndim=2)
    map_dtype = _check_maps(fn, x, token_topk_to_pos, pos_to_expert)
    if token_topk_to_pos.shape[0] != x.shape[0]:
        raise A.invalid_argument(fn, "token_topk_to_pos", f"must have {x.shape[0]} rows (x's tokens), got "
                                 f"{token_topk_to_pos.shape[0]}")
    out = A.alloc(x, (pos_to_expert.shape[0], x.shape[1]), A.dtype_name(x))
    if out.shape[0] and x.shape[1]:
        # A pure copy: rows of whole 4-byte words move as int32 (full-width vectors for 1- and 2-byte
        # elements).
        x_words = A.as_words(x)
        if x_words is not None:
            x, out_kernel, dtype = x_words, A.view_as(out, "int32"), "int32"
        else:
            out_kernel, dtype = out, _tl(A.dtype_name(x))
        K.expand_rows(x.shape[1], token_topk_to_pos.shape[1], dtype, map_dtype).call_all(
            [x, token_topk_to_pos, pos_to_expert, out_kernel])
    return out


def _tl(dtype):
    return {"float8_e4m3fn": "float8_e4m3"}.get(dtype, dtype)


def expand_to_fused_with_sf(x, num_per_channels, token_topk_to_pos, pos_to_expert,
                            use_tma_aligned_col_major_sf=False):
    """expand_to_fused of a (data, sf) pair: data rows and their factor rows (row-major, or TMA-aligned
    column-major when use_tma_aligned_col_major_sf; the input's layout is read from its strides)."""
    fn = "expand_to_fused_with_sf"
    if not isinstance(x, tuple) or len(x) != 2:
        raise A.ArgumentTypeError(f"{fn}: argument 'x' must be a (data, sf) tuple, got {type(x).__name__}")
    data, sf = x
    npc = A.require_int(fn, "num_per_channels", num_per_channels, minimum=1)
    A.require_array(fn, "x[0]", data, ("float8_e4m3fn", "bfloat16", "int8"), ndim=2)
    A.require_array(fn, "x[1]", sf, ("float32", "int32"), ndim=2, last_contiguous=False)
    hidden = data.shape[1] * (2 if A.dtype_name(data) == "int8" else 1)
    if sf.shape[0] != data.shape[0] or sf.shape[1] not in (L.ceil_div(hidden, npc), L.ceil_div(hidden, npc * 4)):
        raise A.invalid_argument(fn, "x[1]", f"must have shape [{data.shape[0]}, {L.ceil_div(hidden, npc)}] for "
                                 f"num_per_channels={npc}, got {list(sf.shape)}")
    in_col = A.stride(sf, 0) == 1 and A.stride(sf, 1) != 1
    if not in_col and A.stride(sf, 1) != 1:
        raise A.invalid_argument(fn, "x[1]", "must be row-major or column-major")
    out = expand_to_fused(data, token_topk_to_pos, pos_to_expert)
    slots, sf_cols = pos_to_expert.shape[0], sf.shape[1]
    if use_tma_aligned_col_major_sf:
        storage = A.alloc(data, (sf_cols, L.align(slots, 4)), A.dtype_name(sf), zero=True)
        out_sf = A.transpose(storage[:, :slots])
    else:
        storage = out_sf = A.alloc(data, (slots, sf_cols), A.dtype_name(sf))
    if slots and sf_cols:
        K.expand_sf_rows(sf_cols, token_topk_to_pos.shape[1], A.dtype_name(sf), A.dtype_name(token_topk_to_pos),
                         in_col, bool(use_tma_aligned_col_major_sf)).call_all(
            [A.transpose(sf) if in_col else sf, token_topk_to_pos, pos_to_expert, storage])
    return out, out_sf


def reduce_fused(x, topk_weights, token_topk_to_pos, fp8_format="", sf=None, out=None):
    """out[t] = sum over k with pos = token_topk_to_pos[t, k] >= 0 of x[pos] * topk_weights[t, k] (* x_sf[pos]
    for a (data, x_sf) input), accumulated in float32 by FMAs in k order, times sf[0] when given (e4m3
    output only); output dtype x's, or e4m3 when fp8_format == 'e4m3'; written into ``out`` when given."""
    fn = "reduce_fused"
    x_sf = None
    if isinstance(x, tuple):
        x, x_sf = x
        A.require_array(fn, "x[1]", x_sf, ("float32",), ndim=1)
    A.require_array(fn, "x", x, ("bfloat16", "float32", "float8_e4m3fn"), ndim=2)
    map_dtype = _index_2d(fn, "token_topk_to_pos", token_topk_to_pos)
    A.require_choice(fn, "fp8_format", fp8_format, ("", "e4m3"))
    tokens, k = token_topk_to_pos.shape
    slots, hidden = x.shape
    if x_sf is not None and x_sf.shape[0] != slots:
        raise A.invalid_argument(fn, "x[1]", f"must have {slots} entries (one per row of x), got {x_sf.shape[0]}")
    if topk_weights is not None:
        A.require_array(fn, "topk_weights", topk_weights, ("float32",), ndim=2)
        if tuple(topk_weights.shape) != (tokens, k):
            raise A.invalid_argument(fn, "topk_weights", f"must have shape [{tokens}, {k}], got "
                                     f"{list(topk_weights.shape)}")
    if sf is not None:
        A.require_array(fn, "sf", sf, ("float32",), ndim=1)
        if sf.shape[0] < 1:
            raise A.invalid_argument(fn, "sf", "must hold at least one value")
        if fp8_format != "e4m3":
            raise A.invalid_argument(fn, "sf", "is only used with fp8_format='e4m3'")
    out_dtype = "float8_e4m3fn" if fp8_format == "e4m3" else A.dtype_name(x)
    if out is None:
        out = A.alloc(x, (tokens, hidden), out_dtype)
    else:
        A.require_array(fn, "out", out, (out_dtype,), ndim=2)
        if tuple(out.shape) != (tokens, hidden):
            raise A.invalid_argument(fn, "out", f"must have shape [{tokens}, {hidden}], got {list(out.shape)}")
        A.check_same_kind(fn, x=x, out=out)
    if tokens and hidden:
        dummy = A.alloc(x, (1,), "float32", zero=True)
        kernel = K.reduce_rows(hidden, k, _tl(A.dtype_name(x)), _tl(out_dtype), map_dtype, topk_weights is not None,
                               x_sf is not None, sf is not None)
        kernel.call_all([x, x_sf if x_sf is not None else A.alloc(x, (slots,), "float32"),
                         topk_weights if topk_weights is not None else A.alloc(x, (tokens, k), "float32"),
                         token_topk_to_pos, sf if sf is not None else dummy, out])
    return out
