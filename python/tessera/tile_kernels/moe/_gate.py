"""top2_sum_gate: DeepSeek's MoE gate (scores, group-limited top-k, weights, shared experts, physical
expert replicas, EP / TP masking) with TileKernels' arguments, as one tile-language kernel."""
import numbers

from .. import _arrays as A
from .. import _kernels_moe as K


def _bool_vector(fn, arg, v, n):
    A.require_array(fn, arg, v, ("bool",), ndim=1)
    if v.shape[0] != n:
        raise A.invalid_argument(fn, arg, f"must have {n} entries (one per token), got {v.shape[0]}")


def top2_sum_gate(logits, bias, num_topk, num_topk_groups, num_groups, use_shared_as_routed, num_shared_experts,
                  routed_scaling_factor, ep_rank, num_ep_ranks, tp_rank, num_tp_ranks, scoring_func, mask=None,
                  fix_routing_mask=None, to_physical_map=None, logical_count=None, unmapped_topk_idx=None):
    """Returns (topk_idx int64, topk_weights float32), both [tokens, num_topk + shared experts].

    Per token: scores s = sigmoid / sqrt(softplus) / softmax of the logits; ranking values s + bias
    (softmax: logits + bias); with num_groups != num_topk_groups only the num_topk_groups groups with the
    largest sum of their two best ranking values compete; the num_topk best are chosen (ties: smaller
    index; tokens with fix_routing_mask take unmapped_topk_idx instead), weighted s / sum(s) *
    routed_scaling_factor, shared experts appended with weight 1, mapped to a physical replica
    (to_physical_map[e, (ep_rank + token * 23333) % logical_count[e]]) and masked to this TP rank's
    experts (-1 elsewhere). Tokens with mask False get -1 / 0. unmapped_topk_idx receives the chosen
    logical experts."""
    fn = "top2_sum_gate"
    A.require_array(fn, "logits", logits, ("float32",), ndim=2)
    A.require_array(fn, "bias", bias, ("float32",), ndim=1)
    if not A.is_contiguous(logits):
        raise A.invalid_argument(fn, "logits", "must be contiguous")
    tokens, experts = logits.shape
    if bias.shape[0] != experts:
        raise A.invalid_argument(fn, "bias", f"must have {experts} entries (one per expert), got {bias.shape[0]}")
    A.require_choice(fn, "scoring_func", scoring_func, K.SCORING)
    k = A.require_int(fn, "num_topk", num_topk, minimum=1)
    groups = A.require_int(fn, "num_groups", num_groups, minimum=0)
    top_groups = A.require_int(fn, "num_topk_groups", num_topk_groups, minimum=0)
    if k > experts:
        raise A.invalid_argument(fn, "num_topk", f"must be <= the number of experts ({experts}), got {k}")
    if (groups == 0) != (top_groups == 0) or top_groups > groups:
        raise A.invalid_argument(fn, "num_topk_groups", f"must be 0 with num_groups 0, else in [1, num_groups]; got "
                                 f"{top_groups} of {groups}")
    if groups and experts % groups:
        raise A.invalid_argument(fn, "num_groups", f"must divide the number of experts ({experts}), got {groups}")
    if groups != top_groups and experts // groups < 2:
        raise A.invalid_argument(fn, "num_groups", "groups must hold at least 2 experts (their top-2 sum ranks them)")
    shared = A.require_int(fn, "num_shared_experts", num_shared_experts, minimum=0) if use_shared_as_routed else 0
    if use_shared_as_routed and (shared not in (1, 2) or k % shared):
        raise A.invalid_argument(fn, "num_shared_experts", f"must be 1 or 2 and divide num_topk, got {shared}")
    ranks = {name: A.require_int(fn, name, v, minimum=0) for name, v in
             (("ep_rank", ep_rank), ("num_ep_ranks", num_ep_ranks), ("tp_rank", tp_rank),
              ("num_tp_ranks", num_tp_ranks))}
    if ranks["num_ep_ranks"] < 1 or ranks["num_tp_ranks"] < 1 or ranks["tp_rank"] >= ranks["num_tp_ranks"]:
        raise A.invalid_argument(fn, "tp_rank", "needs num_ep_ranks >= 1 and 0 <= tp_rank < num_tp_ranks")
    if not isinstance(routed_scaling_factor, numbers.Real):
        raise A.ArgumentTypeError(f"{fn}: argument 'routed_scaling_factor' must be a number")
    if mask is not None:
        _bool_vector(fn, "mask", mask, tokens)
    if fix_routing_mask is not None:
        _bool_vector(fn, "fix_routing_mask", fix_routing_mask, tokens)
        if unmapped_topk_idx is None:
            raise A.invalid_argument(fn, "unmapped_topk_idx", "is required with fix_routing_mask")
    if unmapped_topk_idx is not None:
        A.require_array(fn, "unmapped_topk_idx", unmapped_topk_idx, ("int64",), ndim=2)
        if tuple(unmapped_topk_idx.shape) != (tokens, k):
            raise A.invalid_argument(fn, "unmapped_topk_idx", f"must have shape [{tokens}, {k}], got "
                                     f"{list(unmapped_topk_idx.shape)}")
    if (to_physical_map is None) != (logical_count is None):
        raise A.invalid_argument(fn, "logical_count", "must be given together with to_physical_map")
    extra = 0
    if to_physical_map is not None:
        A.require_array(fn, "to_physical_map", to_physical_map, ("int32",), ndim=2)
        A.require_array(fn, "logical_count", logical_count, ("int32",), ndim=1)
        if to_physical_map.shape[0] != experts + shared or logical_count.shape[0] != experts + shared:
            raise A.invalid_argument(fn, "to_physical_map", f"must have {experts + shared} rows (logical experts)")
        extra = to_physical_map.shape[1] - 1
    if (experts + extra) // ranks["num_ep_ranks"] < 1:
        raise A.invalid_argument(fn, "num_ep_ranks", f"must be <= the number of physical experts ({experts + extra})")
    if shared > extra:
        raise A.invalid_argument(fn, "num_shared_experts", f"must be <= the extra physical experts ({extra})")
    A.check_same_kind(fn, logits=logits, bias=bias, mask=mask, fix_routing_mask=fix_routing_mask,
                      to_physical_map=to_physical_map, logical_count=logical_count, unmapped_topk_idx=unmapped_topk_idx)
    topk_idx = A.alloc(logits, (tokens, k + shared), "int64")
    topk_weights = A.alloc(logits, (tokens, k + shared), "float32")
    if tokens == 0:
        return topk_idx, topk_weights
    flags = A.alloc(logits, (tokens,), "bool", zero=True)
    map_cols = to_physical_map.shape[1] if to_physical_map is not None else 1
    kernel = K.top2_sum_gate(scoring_func, experts, k, top_groups, groups, shared, mask is not None,
                             fix_routing_mask is not None, unmapped_topk_idx is not None, to_physical_map is not None,
                             map_cols)
    kernel.call_all([logits, bias, mask if mask is not None else flags,
                     fix_routing_mask if fix_routing_mask is not None else flags,
                     to_physical_map if to_physical_map is not None else A.alloc(logits, (experts + shared, 1), "int32",
                                                                                 zero=True),
                     logical_count if logical_count is not None else A.alloc(logits, (experts + shared,), "int32",
                                                                             zero=True),
                     topk_idx, unmapped_topk_idx if unmapped_topk_idx is not None else A.alloc(logits, (tokens, k),
                                                                                               "int64"),
                     topk_weights, extra, float(routed_scaling_factor), ranks["ep_rank"], ranks["num_ep_ranks"],
                     ranks["tp_rank"], ranks["num_tp_ranks"]])
    return topk_idx, topk_weights
