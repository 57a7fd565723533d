"""tessera.tile_kernels.moe against numpy references.

Selections, counts, index rewrites and layouts are compared exactly; normalize_weight exactly (the
reference adds in the same float32 order); reduce_fused against a float64 sum within float32 rounding
of the FMA chain, and bitwise between numpy and torch inputs and across thread counts.
"""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera.tile_kernels import moe as M


def stable_topk(scores, k):
    return np.argsort(-scores.astype(np.float64), axis=1, kind="stable")[:, :k]


def routing(rng, tokens=37, topk=6, experts=16):
    idx = np.stack([rng.permutation(experts)[:topk] for _ in range(tokens)]).astype(np.int64)
    idx[rng.random(idx.shape) < 0.15] = -1
    return idx


def test_topk_gate_ties_take_the_smaller_index(rng):
    scores = rng.standard_normal((37, 72)).astype(np.float32)
    scores[3, :] = 1.0                       # all equal
    scores[4, ::3] = np.float32(-np.inf)      # -inf entries still get picked when needed
    scores[5, :] = -np.inf
    got = M.topk_gate(scores, 6)
    assert got.dtype == np.int64 and np.array_equal(got, stable_topk(scores, 6))
    assert np.array_equal(M.topk_gate(scores[:, :8].copy(), 8), stable_topk(scores[:, :8], 8))


@pytest.mark.parametrize("n_sum", [1, 2])
def test_topk_sum_and_topk_group_idx(rng, n_sum):
    scores = rng.standard_normal((37, 8, 9)).astype(np.float32)
    scores[2, 1, :2] = scores[2, 1].max() + 1  # a repeated maximum counts twice
    top = np.sort(scores, axis=-1)[..., ::-1][..., :n_sum]
    group = top[..., 0] + top[..., 1] if n_sum == 2 else top[..., 0]
    assert np.array_equal(M.topk_sum_and_topk_group_idx(scores, n_sum, 3), stable_topk(group, 3))


def test_group_count_and_aux_fi(rng):
    idx = routing(rng)
    counts = np.bincount(idx[idx >= 0], minlength=16)
    got = M.group_count(idx, 16)
    assert got.dtype == np.int32 and np.array_equal(got, counts)
    want = counts.astype(np.float32) * np.float32(16) / np.float32(37 * 4)
    assert np.array_equal(M.aux_fi(idx, 16, 4), want)
    assert np.array_equal(M.group_count(idx.astype(np.int32), 16), counts)


def test_mask_indices_by_tp(rng):
    idx = routing(rng, experts=64)
    n, ep, tp_n = 64, 8, 2
    per_gpu, per_dp = n // ep, tp_n * n // ep
    for tp in range(tp_n):
        v = idx.copy()
        invalid = (v < 0) | ((v // per_gpu) % tp_n != tp)
        v = v - tp * per_gpu
        v = v - (v // per_dp) * (per_dp - per_gpu)
        v[invalid | (v < 0)] = -1
        assert np.array_equal(M.mask_indices_by_tp(idx, n, ep, tp, tp_n), v)


def test_normalize_weight(rng):
    w = rng.random((300, 7)).astype(np.float32)
    w[0] = 0
    den = np.full(300, 1e-20, np.float32)
    for k in range(7):
        den = den + w[:, k]
    got_den, got = M.normalize_weight(w)
    assert np.array_equal(got_den, den) and np.array_equal(got, w / den[:, None])


def test_inplace_unique_group_indices(rng):
    g = rng.integers(-1, 5, size=(70, 9)).astype(np.int64)
    want = g.copy()
    for row in want:
        seen = set()
        for j, v in enumerate(row):
            if v in seen:
                row[j] = -1
            seen.add(v)
    assert M.inplace_unique_group_indices(g, 5) is None
    assert np.array_equal(g, want)


@pytest.mark.parametrize("alignment", [1, 8, 64])
def test_get_fused_mapping(rng, alignment):
    idx = routing(rng)
    maps = M.get_fused_mapping(idx, 16, 0, alignment)
    p2e, p2t, p2tk, tk2p, start, end, per_expert, per_list = maps
    counts = np.bincount(idx[idx >= 0], minlength=16)
    aligned = -(-counts // alignment) * alignment
    assert per_list == aligned.tolist() and np.array_equal(per_expert, aligned)
    assert np.array_equal(start, np.cumsum(aligned) - aligned) and np.array_equal(end, np.cumsum(aligned))
    assert p2e.shape == (aligned.sum(),)
    for e in range(16):  # each expert's pairs in (token, k) order, then padding
        t, k = np.nonzero(idx == e)
        seg = slice(start[e], start[e] + counts[e])
        assert (p2e[seg] == e).all() and np.array_equal(p2t[seg], t) and np.array_equal(p2tk[seg], t * 6 + k)
        assert (p2e[start[e] + counts[e]:end[e]] == -1).all() and (p2t[start[e] + counts[e]:end[e]] == -1).all()
    valid = idx >= 0
    assert (tk2p[~valid] == -1).all() and np.array_equal(p2tk[tk2p[valid]], np.flatnonzero(valid))
    fixed = M.get_fused_mapping(idx, 16, 512, alignment)
    assert fixed[0].shape == (512,) and fixed[7] == [] and (fixed[0][aligned.sum():] == -1).all()


def test_expand_and_reduce_fused(rng):
    idx = routing(rng)
    p2e, _, _, tk2p, *_ = M.get_fused_mapping(idx, 16, 0, 8)
    x = rng.standard_normal((37, 200)).astype(ml_dtypes.bfloat16)
    out = M.expand_to_fused(x, tk2p, p2e)
    want = np.zeros((p2e.shape[0], 200), ml_dtypes.bfloat16)
    want[tk2p[tk2p >= 0]] = np.repeat(x, 6, axis=0)[(tk2p >= 0).reshape(-1)]
    assert np.array_equal(out.view(np.uint16), want.view(np.uint16))

    sf = rng.random((37, 2)).astype(np.float32)
    for col in (False, True):
        sf_in = np.asfortranarray(sf) if col else sf
        out2, out_sf = M.expand_to_fused_with_sf((x, sf_in), 128, tk2p, p2e, use_tma_aligned_col_major_sf=col)
        want_sf = np.zeros((p2e.shape[0], 2), np.float32)
        want_sf[tk2p[tk2p >= 0]] = np.repeat(sf, 6, axis=0)[(tk2p >= 0).reshape(-1)]
        assert np.array_equal(out2.view(np.uint16), want.view(np.uint16)) and np.array_equal(out_sf, want_sf)
        assert (out_sf.strides[0] == 4) == col

    w = rng.random((37, 6)).astype(np.float32)
    row_sf = rng.random(p2e.shape[0]).astype(np.float32)
    scale = np.array([0.75], np.float32)
    got = M.reduce_fused((out, row_sf), w, tk2p)
    ref = np.zeros((37, 200))
    for t in range(37):
        for k in range(6):
            if tk2p[t, k] >= 0:
                ref[t] += out[tk2p[t, k]].astype(np.float64) * (np.float64(w[t, k]) * row_sf[tk2p[t, k]])
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2 ** -8, atol=1e-6)
    fp8 = M.reduce_fused(out, None, tk2p, fp8_format="e4m3", sf=scale)
    plain = np.zeros((37, 200))
    for t in range(37):
        plain[t] = sum(out[p].astype(np.float64) for p in tk2p[t] if p >= 0)
    assert fp8.dtype == ml_dtypes.float8_e4m3fn and fp8.shape == (37, 200)
    np.testing.assert_allclose(fp8.astype(np.float64), plain * 0.75, rtol=2 ** -4, atol=2 ** -9)


@pytest.mark.parametrize("dtype,cols,view,words", [
    ("bfloat16", 201, "whole", False),     # 402-byte rows: not whole words, the element-wise copy
    ("bfloat16", 200, "strided", True),    # rows of a wider array: int32 words with a row stride
    ("bfloat16", 200, "shifted", False),   # starts 2 bytes into a word: the element-wise copy
    ("float8_e4m3fn", 204, "whole", True),  # 4 codes per word
    ("float8_e4m3fn", 203, "whole", False),
    ("float32", 37, "strided", True),
])
def test_expand_to_fused_copies_rows_of_any_size_and_layout(rng, dtype, cols, view, words):
    from tessera.tile_kernels import _arrays

    idx = routing(rng)
    p2e, _, _, tk2p, *_ = M.get_fused_mapping(idx, 16, 0, 8)
    wide = rng.standard_normal((37, cols + 6)).astype(np.float32).astype(getattr(ml_dtypes, dtype, dtype))
    x = {"whole": np.ascontiguousarray(wide[:, :cols]), "strided": wide[:, :cols],
         "shifted": wide[:, 1:cols + 1]}[view]
    assert (_arrays.as_words(x) is not None) == words  # both copies are covered
    out = M.expand_to_fused(x, tk2p, p2e)
    want = np.zeros((p2e.shape[0], cols), x.dtype)
    want[tk2p[tk2p >= 0]] = np.repeat(x, 6, axis=0)[(tk2p >= 0).reshape(-1)]
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize]
    assert np.array_equal(out.view(bits), want.view(bits))


def test_torch_inputs_give_the_numpy_results(rng):
    torch = pytest.importorskip("torch")
    idx = routing(rng)
    maps = M.get_fused_mapping(torch.from_numpy(idx), 16, 0, 8)
    maps_np = M.get_fused_mapping(idx, 16, 0, 8)
    assert all(np.array_equal(a.numpy(), b) for a, b in zip(maps[:7], maps_np[:7])) and maps[7] == maps_np[7]
    x = rng.standard_normal((37, 200)).astype(np.float32)
    w = rng.random((37, 6)).astype(np.float32)
    e = M.expand_to_fused(torch.from_numpy(x), maps[3], maps[0])
    r = M.reduce_fused(e, torch.from_numpy(w), maps[3])
    r_np = M.reduce_fused(M.expand_to_fused(x, maps_np[3], maps_np[0]), w, maps_np[3])
    assert isinstance(r, torch.Tensor) and np.array_equal(r.numpy(), r_np)
    assert M.topk_gate(torch.from_numpy(x), 4).dtype == torch.int64


@pytest.mark.parametrize("call,match", [
    (lambda: M.topk_gate(np.zeros((4, 8), np.float64), 2), r"topk_gate: argument 'scores' must have dtype float32"),
    (lambda: M.topk_gate(np.zeros((4, 8), np.float32), 9), r"topk_gate: argument 'num_topk' must be <= num_experts"),
    (lambda: M.topk_sum_and_topk_group_idx(np.zeros((4, 8, 3), np.float32), 3, 2), r"'num_topk_sum' must be one"),
    (lambda: M.group_count(np.zeros((4,), np.int64), 8), r"group_count: argument 'group_idx' must have 2 dim"),
    (lambda: M.mask_indices_by_tp(np.zeros((4, 2), np.int64), 16, 2, 2, 2), r"argument 'tp_rank' must be <"),
    (lambda: M.normalize_weight(np.zeros((4, 2), np.float64)), r"normalize_weight: argument 'topk_weights'"),
    (lambda: M.inplace_unique_group_indices(np.zeros((4, 2), np.int64), 129), r"'num_groups' must be <= 128"),
    (lambda: M.get_fused_mapping(np.zeros((4, 2), np.int32), 8, 0, 8), r"get_fused_mapping: argument 'topk_idx'"),
    (lambda: M.reduce_fused(np.zeros((8, 64), np.float32), np.zeros((3, 2), np.float32),
                            np.zeros((4, 2), np.int32)), r"reduce_fused: argument 'topk_weights' must have shape"),
    (lambda: M.reduce_fused(np.zeros((8, 64), np.float32), None, np.zeros((4, 2), np.int32), fp8_format="e5m2"),
     r"reduce_fused: argument 'fp8_format'"),
])
def test_bad_input_raises_named_error(call, match):
    with pytest.raises(tessera.InvalidArgumentError, match=match):
        call()


def test_inplace_function_leaves_input_untouched_on_bad_input():
    g = np.array([[1, 1, 2]], np.int64)
    with pytest.raises(tessera.InvalidArgumentError):
        M.inplace_unique_group_indices(g, 300)
    assert g.tolist() == [[1, 1, 2]]


def test_not_implemented_names_raise():
    for name in M._NOT_IMPLEMENTED:
        with pytest.raises(tessera.NotImplementedInTessera, match=name):
            getattr(M, name)


_DETERMINISM = """
import sys, hashlib, numpy as np, tessera
from tessera.tile_kernels import moe as M
tessera.set_num_threads(int(sys.argv[1]))
rng = np.random.default_rng(3)
idx = np.stack([rng.permutation(64)[:8] for _ in range(999)]).astype(np.int64)
maps = M.get_fused_mapping(idx, 64, 0, 16)
x = rng.standard_normal((999, 256)).astype(np.float32)
w = rng.random((999, 8)).astype(np.float32)
h = hashlib.sha256()
for part in (*maps[:7], M.group_count(idx, 64), M.topk_gate(x, 8), M.reduce_fused(M.expand_to_fused(x, maps[3], maps[0]), w, maps[3])):
    h.update(np.ascontiguousarray(part).tobytes())
print(h.hexdigest())
"""


def test_bitwise_identical_across_thread_counts():
    outs = {subprocess.run([sys.executable, "-c", _DETERMINISM, str(n)], capture_output=True, text=True,
                           env=dict(os.environ), check=True).stdout.strip() for n in (1, 2)}
    assert len(outs) == 1 and len(next(iter(outs))) == 64


def gate_reference(logits, bias, k, top_groups, groups, shared, scale, ep_rank, ep_n, tp, tp_n, scoring, mask,
                   fix, unmapped, phys, count):
    """float64 model of top2_sum_gate, token by token; returns (idx, weights, unmapped after the call)."""
    x = logits.astype(np.float64)
    if scoring == "sigmoid":
        s = 1 / (1 + np.exp(-x))
    elif scoring == "sqrtsoftplus":
        s = np.sqrt(np.where(x > 20, x, np.log1p(np.exp(x))))
    else:
        e = np.exp(x - x.max(1, keepdims=True))
        s = e / e.sum(1, keepdims=True)
    rank = (x if scoring == "softmax" else s) + bias
    tokens, experts = x.shape
    idx = np.full((tokens, k + shared), -1, np.int64)
    w = np.zeros((tokens, k + shared), np.float32)
    new_unmapped = unmapped.copy() if unmapped is not None else None
    extra = phys.shape[1] - 1 if phys is not None else 0
    per_rank = (experts + extra) // ep_n
    per_dp = per_rank * tp_n
    for t in range(tokens):
        if mask is not None and not mask[t]:
            if new_unmapped is not None:
                new_unmapped[t] = -1
            continue
        if fix is not None and fix[t]:
            chosen = unmapped[t].copy()
        else:
            r = rank[t].copy()
            if groups != top_groups:
                g = np.sort(r.reshape(groups, -1), axis=1)[:, ::-1]
                keep = np.argsort(-(g[:, 0] + g[:, 1]), kind="stable")[:top_groups]
                r = np.where(np.isin(np.arange(experts) // (experts // groups), keep), r, -np.inf)
            chosen = np.argsort(-r, kind="stable")[:k]
        if new_unmapped is not None:
            new_unmapped[t] = chosen
        sc = s[t, np.maximum(chosen, 0)]
        weights = list(sc / max(sc.sum(), 1e-20) * scale) + [1.0] * shared
        logical = list(chosen) + list(range(experts, experts + shared))
        for j, e in enumerate(logical):
            if e >= 0 and phys is not None:
                e = phys[e, (ep_rank + t * 23333) % count[e]]
            if e >= 0:
                if (e // per_rank) % tp_n != tp:
                    e = -1
                else:
                    local = e - tp * per_rank
                    e = local - (local // per_dp) * (per_dp - per_rank)
                    e = e if e >= 0 else -1
            idx[t, j] = e
            w[t, j] = weights[j]
    return idx, w, new_unmapped


@pytest.mark.parametrize("scoring,grouped,extras", [
    ("sigmoid", True, False), ("sqrtsoftplus", False, True), ("softmax", True, True)])
def test_top2_sum_gate(rng, scoring, grouped, extras):
    tokens, experts, k = 45, 64, 6
    logits = rng.standard_normal((tokens, experts)).astype(np.float32)
    bias = (rng.standard_normal(experts) * 0.1).astype(np.float32)
    groups, top_groups = (8, 3) if grouped else (0, 0)
    shared = 2 if extras else 0
    mask = rng.random(tokens) < 0.8 if extras else None
    fix = rng.random(tokens) < 0.3 if extras else None
    unmapped = np.stack([rng.permutation(experts)[:k] for _ in range(tokens)]).astype(np.int64) if extras else None
    phys = count = None
    if extras:
        phys = rng.integers(0, experts + 4, size=(experts + shared, 3)).astype(np.int32)
        count = rng.integers(1, 4, size=experts + shared).astype(np.int32)
    args = (k, top_groups, groups, shared, 2.5, 1, 4, 1, 2, scoring, mask, fix, unmapped, phys, count)
    want_idx, want_w, want_unmapped = gate_reference(logits, bias, *args)
    got_unmapped = unmapped.copy() if extras else None
    idx, w = M.top2_sum_gate(logits, bias, k, top_groups, groups, extras, shared, 2.5, 1, 4, 1, 2, scoring,
                             mask=mask, fix_routing_mask=fix, to_physical_map=phys, logical_count=count,
                             unmapped_topk_idx=got_unmapped)
    assert idx.dtype == np.int64 and np.array_equal(idx, want_idx)
    np.testing.assert_allclose(w, want_w, rtol=2e-6, atol=1e-7)
    if extras:
        assert np.array_equal(got_unmapped, want_unmapped)


def test_reduce_fused_into_given_output(rng):
    pos = np.array([[0, 2], [1, -1]], np.int32)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    out = np.full((2, 64), 7.0, np.float32)
    assert M.reduce_fused(x, None, pos, out=out) is out
    assert np.array_equal(out, np.stack([np.float32(0) + x[0] + x[2], np.float32(0) + x[1]]))
    keep = out.copy()
    with pytest.raises(tessera.InvalidArgumentError, match=r"reduce_fused: argument 'out' must have shape"):
        M.reduce_fused(x, None, pos, out=np.zeros((3, 64), np.float32))
    with pytest.raises(tessera.InvalidArgumentError, match=r"argument 'sf' is only used with fp8_format"):
        M.reduce_fused(x, None, pos, sf=np.ones(1, np.float32), out=out)
    assert np.array_equal(out, keep)
