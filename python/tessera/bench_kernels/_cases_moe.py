"""The MoE layout rows: expand_to_fused (token rows copied to their experts' slots, DeepSeek-V3's
top-8 of 256 experts) and reduce_fused (the weighted sum of a token's expert rows back). Peers: the
same gathers in plain numpy (fancy indexing) and torch (index_select)."""
import numpy as np

from ._case import BF16, Case, as_numpy, as_torch, ratio, rotated, sample_rows

EXPERTS, TOPK = 256, 8


def _routing(tokens, alignment, seed):
    from ..tile_kernels.moe import get_fused_mapping

    gen = np.random.default_rng(seed)
    topk_idx = np.argsort(gen.random((tokens, EXPERTS)), axis=1)[:, :TOPK].astype(np.int64)
    pos_to_expert, pos_to_token, _, token_topk_to_pos = get_fused_mapping(topk_idx, EXPERTS, 0, alignment)[:4]
    return pos_to_expert, pos_to_token, token_topk_to_pos


def expand_to_fused(tokens, hidden, alignment, copies_for, torch):
    from ..tile_kernels.moe import expand_to_fused as ours

    pos_to_expert, pos_to_token, token_topk_to_pos = _routing(tokens, alignment, 7)
    slots = pos_to_expert.shape[0]
    gen = np.random.default_rng(8)
    x0 = gen.standard_normal((tokens, hidden), dtype=np.float32).astype(BF16)
    xs = rotated(x0, copies_for(x0.nbytes))
    xt = [as_torch(torch, x) for x in xs] if torch else None
    source = np.maximum(pos_to_token, 0).astype(np.int64)
    padding = pos_to_token < 0

    def numpy_expand(x):
        out = x[source]
        out[padding] = 0
        return out

    if torch:
        t_source, t_padding = torch.from_numpy(source), torch.from_numpy(padding)

    def torch_expand(x):
        out = x.index_select(0, t_source)
        out[t_padding] = 0
        return out

    want = numpy_expand(x0)

    def check(out):
        return 0.0 if np.array_equal(as_numpy(out).view(np.int16), want.view(np.int16)) else float("inf")

    peers = {"numpy": lambda i: numpy_expand(xs[i])}
    if torch:
        peers["torch"] = lambda i: torch_expand(xt[i])
    moved = tokens * hidden * 2 + slots * hidden * 2 + token_topk_to_pos.nbytes + pos_to_expert.nbytes
    return Case("expand_to_fused", tokens, hidden, slots, moved, len(xs),
                lambda i: ours(xs[i], token_topk_to_pos, pos_to_expert), peers, check)


def reduce_fused(tokens, hidden, alignment, copies_for, torch):
    from ..tile_kernels.moe import reduce_fused as ours

    pos_to_expert, _, token_topk_to_pos = _routing(tokens, alignment, 9)
    slots = pos_to_expert.shape[0]
    gen = np.random.default_rng(10)
    x0 = gen.standard_normal((slots, hidden), dtype=np.float32).astype(BF16)
    w = gen.random((tokens, TOPK), dtype=np.float32)
    xs = rotated(x0, copies_for(x0.nbytes))
    xt = [as_torch(torch, x) for x in xs] if torch else None
    pos = token_topk_to_pos.astype(np.int64)

    def numpy_reduce(x):
        acc = np.zeros((tokens, hidden), np.float32)
        for j in range(TOPK):
            acc += x[pos[:, j]].astype(np.float32) * w[:, j:j + 1]
        return acc.astype(BF16)

    if torch:
        t_pos, t_w = torch.from_numpy(pos.reshape(-1)), torch.from_numpy(w)

    def torch_reduce(x):
        rows = x.index_select(0, t_pos).view(tokens, TOPK, hidden).float()
        return (rows * t_w.unsqueeze(2)).sum(dim=1).to(torch.bfloat16)

    rows = sample_rows(tokens)

    def check(out):
        terms = x0[pos[rows]].astype(np.float64) * w[rows].astype(np.float64)[..., None]
        want = terms.sum(axis=1)
        tol = 2.0 ** -8 * np.abs(want) + TOPK * 2.0 ** -23 * np.abs(terms).sum(axis=1) + 1e-30
        return ratio(np.abs(as_numpy(out)[rows].astype(np.float64) - want), tol)

    peers = {"numpy": lambda i: numpy_reduce(xs[i])}
    if torch:
        peers["torch"] = lambda i: torch_reduce(xt[i])
    moved = tokens * TOPK * hidden * 2 + w.nbytes + token_topk_to_pos.nbytes + tokens * hidden * 2
    return Case("reduce_fused", tokens, hidden, slots, moved, len(xs),
                lambda i: ours(xs[i], w, token_topk_to_pos), peers, check)
