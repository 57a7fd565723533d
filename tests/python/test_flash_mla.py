"""tessera.flash_mla decode against float64 (spec tolerances): dense over a paged bf16/fp16 cache with NaN in
every unused slot and garbage in unused block_table entries, sparse over both FP8 layouts with invalid
indices skipped, plus the scheduling metadata (both get_mla_metadata forms, recorded config) and bitwise
determinism across thread counts."""
import platform

import numpy as np
import pytest

import tessera
from tessera import flash_mla
from flash_mla_reference import (BF16, DENSE_LSE, DENSE_OUT, SPARSE_OUT, assert_close, attention,
                                 spec_dequantize)

# Besides the reference path: x86's bf16 level, or on ARM the CPU's best (sve or neon; scripts/test_arm64.sh).
ARM = platform.machine() in ("aarch64", "arm64")
ISAS = ["scalar", tessera.cpu_info()["best_isa"] if ARM else "avx512bf16"]


@pytest.fixture(params=ISAS)
def isa(request):
    if request.param == "avx512bf16" and "avx512_bf16" not in tessera.cpu_info()["features"]:
        pytest.skip("this CPU lacks avx512_bf16")
    tessera.set_isa(request.param)
    yield request.param
    tessera.set_isa(None)


def dense_problem(rng, b, s_q, h_q, h_k, d, lens, dtype=BF16, strided_q=False, block=64):
    max_blocks = max((l + block - 1) // block for l in lens) + 1
    total = sum((l + block - 1) // block for l in lens) + 2
    q_full = rng.standard_normal((b, s_q, h_q, d + (24 if strided_q else 0))).astype(dtype)
    q = q_full[..., :d]
    cache = np.full((total, block, h_k, d), np.nan, dtype=dtype)
    ids = rng.permutation(total).astype(np.int32)
    block_table = np.empty((b, max_blocks), dtype=np.int32)
    keys, used = [], 0
    for i, length in enumerate(lens):
        nblk = (length + block - 1) // block
        block_table[i, :nblk] = ids[used:used + nblk]
        block_table[i, nblk:] = np.resize(np.array([-1, 2**31 - 1, total + 17], np.int32), max_blocks - nblk)
        used += nblk
        rows = rng.standard_normal((length, h_k, d)).astype(dtype)
        for t in range(length):
            cache[block_table[i, t // block], t % block] = rows[t]
        keys.append(rows.astype(np.float64))
    return q, cache, block_table, np.array(lens, dtype=np.int32), keys


def dense_reference(q, keys, lens, h_k, d_v, causal):
    b, s_q, h_q, d = q.shape
    out = np.zeros((b, s_q, h_q, d_v))
    lse = np.zeros((b, h_q, s_q))
    for i in range(b):
        for s in range(s_q):
            limit = min(max(lens[i] - s_q + s + 1, 0), lens[i]) if causal else lens[i]
            for g in range(h_k):
                heads = range(g * (h_q // h_k), (g + 1) * (h_q // h_k))
                o, l, _ = attention(q[i, s, heads].astype(np.float64), keys[i][:limit, g], d_v, d ** -0.5)
                out[i, s, heads] = o
                lse[i, heads, s] = l
    return out, lse


DENSE_CASES = [
    # b, s_q, h_q, h_k, d, lens, causal, dtype, strided q
    (3, 1, 16, 1, 576, [0, 700, 1100], False, BF16, False),
    (2, 2, 32, 1, 576, [600, 901], True, BF16, False),
    (2, 1, 8, 2, 576, [520, 1], False, BF16, True),
    (2, 2, 7, 1, 512, [777, 513], True, BF16, False),
    (2, 1, 16, 1, 576, [600, 650], False, np.dtype(np.float16), False),
]


@pytest.mark.parametrize("case", DENSE_CASES)
def test_dense_decode_matches_float64(rng, isa, case):
    b, s_q, h_q, h_k, d, lens, causal, dtype, strided = case
    q, cache, bt, seqlens, keys = dense_problem(rng, b, s_q, h_q, h_k, d, lens, dtype, strided)
    meta, none = flash_mla.get_mla_metadata()
    assert none is None and not meta.have_initialized
    out, lse = flash_mla.flash_mla_with_kvcache(q, cache, bt, seqlens, 512, meta, causal=causal)
    assert out.dtype == dtype and out.shape == (b, s_q, h_q, 512) and lse.shape == (b, h_q, s_q)
    ref_out, ref_lse = dense_reference(q, keys, lens, h_k, 512, causal)
    assert_close("out", out.astype(np.float64), ref_out, DENSE_OUT)
    assert_close("lse", lse, ref_lse, DENSE_LSE)
    if 0 in lens:
        i = lens.index(0)
        assert (out[i].astype(np.float64) == 0).all() and np.isposinf(lse[i]).all()


def sparse_problem(rng, model1, b, s_q, h_q, topk, extra_topk=0, blocks=None, invalid=0.25, strided=False):
    d = 512 if model1 else 576
    layout = flash_mla.FP8KVCacheLayout.MODEL1_FP8Sparse if model1 else flash_mla.FP8KVCacheLayout.V32_FP8Sparse

    def cache_and_indices(n_topk, nblocks, bs):
        cache = flash_mla.quantize_k_cache(rng.standard_normal((nblocks, bs, 1, d)).astype(BF16), layout)
        slots = nblocks * bs
        referenced = rng.random(slots) < 0.7
        raw = cache.view(np.uint8)
        for slot in np.flatnonzero(~referenced):  # unreferenced slots: NaN values, scales and RoPE
            blk, off = divmod(slot, bs)
            if model1:
                base = np.lib.stride_tricks.as_strided(raw[blk, 0, 0], shape=(cache.strides[0],), strides=(1,))
                base[off * 576:(off + 1) * 576] = 0xFF
                base[bs * 576 + off * 8: bs * 576 + off * 8 + 8] = 0xFF
            else:
                raw[blk, off, 0, :] = 0xFF
        pool = np.flatnonzero(referenced)
        idx = rng.choice(pool, size=(b, s_q, n_topk)).astype(np.int32)
        bad = np.array([-1, -1, -7, -2**31, slots, slots + 100, 2**31 - 1], dtype=np.int32)
        mask = rng.random(idx.shape) < invalid
        idx[mask] = rng.choice(bad, size=int(mask.sum()))
        if strided:
            wide = np.zeros((b, s_q, 2 * n_topk), dtype=np.int32)
            wide[..., ::2] = idx
            idx = wide[..., ::2]
        return cache, idx, spec_dequantize(cache, model1)

    nblocks = blocks or max(8, 2 * topk // 64)
    cache, idx, rows = cache_and_indices(topk, nblocks, 64)
    extra = cache_and_indices(extra_topk, max(4, 2 * extra_topk // 32), 32) if extra_topk else None
    q_full = rng.standard_normal((b, s_q, h_q, 2 * d if strided else d)).astype(BF16)
    q = q_full[..., ::2] if strided else q_full
    return q, (cache, idx, rows), extra


def sparse_reference(q, main, extra, topk_length, extra_topk_length, sink):
    b, s_q, h_q, d = q.shape
    out, lse = np.zeros((b, s_q, h_q, 512)), np.zeros((b, h_q, s_q))
    for i in range(b):
        for s in range(s_q):
            parts = []
            for src, length in ((main, topk_length), (extra, extra_topk_length)):
                if src is None:
                    continue
                cache_rows, idx = src[2], src[1][i, s]
                idx = idx[: (length[i] if length is not None else idx.shape[0])]
                idx = idx[(idx >= 0) & (idx < cache_rows.shape[0])]
                parts.append(cache_rows[idx])
            o, l, _ = attention(q[i, s].astype(np.float64), np.concatenate(parts), 512, d ** -0.5, sink)
            out[i, s], lse[i, :, s] = o, l
    return out, lse


@pytest.mark.parametrize("model1", [False, True], ids=["V32", "MODEL1"])
@pytest.mark.parametrize("h_q,s_q,extras", [(64, 2, False), (128, 1, True)], ids=["h64", "h128-extras"])
def test_sparse_decode_matches_float64(rng, isa, model1, h_q, s_q, extras):
    b, topk = 2, 768
    q, main, extra = sparse_problem(rng, model1, b, s_q, h_q, topk, extra_topk=256 if extras else 0,
                                    strided=extras)
    topk_length = np.array([topk, rng.integers(topk // 2, topk)], dtype=np.int32) if extras else None
    extra_len = np.array([256, 200], dtype=np.int32) if extras else None
    sink = rng.uniform(-1, 3, h_q).astype(np.float32) if extras else None
    if extras:
        sink[0], sink[1] = np.inf, -np.inf
    meta, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(
        q, main[0], None, None, 512, meta, is_fp8_kvcache=True, indices=main[1], attn_sink=sink,
        extra_k_cache=extra[0] if extra else None, extra_indices_in_kvcache=extra[1] if extra else None,
        topk_length=topk_length, extra_topk_length=extra_len)
    ref_out, ref_lse = sparse_reference(q, main, extra, topk_length, extra_len, sink)
    assert_close("out", out.astype(np.float64), ref_out, SPARSE_OUT)
    assert_close("lse", lse, ref_lse, DENSE_LSE)
    assert meta.have_initialized and meta.config.topk == topk and meta.config.is_fp8_kvcache


def test_all_invalid_lists_and_zero_topk_length(rng, isa):
    q, main, _ = sparse_problem(rng, False, 2, 2, 64, 128)
    idx = main[1].copy()
    idx[0, 1] = -1                  # every entry invalid
    idx[1, 0] = 10**6               # every entry out of range
    topk_length = np.array([128, 0], dtype=np.int32)  # request 1 attends to nothing at all
    meta, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(q, main[0], None, None, 512, meta, is_fp8_kvcache=True,
                                                indices=idx, topk_length=topk_length)
    for i, s in [(0, 1), (1, 0), (1, 1)]:
        assert (out[i, s].astype(np.float64) == 0).all() and np.isposinf(lse[i, :, s]).all()
    assert np.isfinite(lse[0, :, 0]).all()


def test_metadata_forms_give_identical_bits(rng):
    q, cache, bt, seqlens, _ = dense_problem(rng, 3, 2, 16, 1, 576, [1800, 0, 700])
    meta, _ = flash_mla.get_mla_metadata()
    out, lse = flash_mla.flash_mla_with_kvcache(q, cache, bt, seqlens, 512, meta, causal=True)
    tile, splits = flash_mla.get_mla_decoding_metadata(seqlens, 2 * 16, 1)
    assert tile.dtype == np.int32 and tile.shape[1] == 8 and splits.shape == (4,)
    assert np.array_equal(splits, meta.num_splits) and splits[1] > 1  # the 1800-token request is split
    out2, lse2 = flash_mla.flash_mla_with_kvcache(q, cache, bt, seqlens, 512, tile, splits, causal=True)
    assert np.array_equal(out.view(np.uint16), out2.view(np.uint16)) and np.array_equal(lse, lse2)
    with pytest.raises(tessera.InvalidArgumentError, match="num_splits"):
        flash_mla.flash_mla_with_kvcache(q, cache, bt, seqlens, 512, tile, None, causal=True)


def test_sched_meta_rejects_a_different_config(rng):
    q, main, _ = sparse_problem(rng, False, 2, 1, 64, 128)
    meta, _ = flash_mla.get_mla_metadata()
    flash_mla.flash_mla_with_kvcache(q, main[0], None, None, 512, meta, is_fp8_kvcache=True, indices=main[1])
    with pytest.raises(tessera.InvalidArgumentError, match=r"sched_meta\.config\.topk .*recorded 128, got 64"):
        flash_mla.flash_mla_with_kvcache(q, main[0], None, None, 512, meta, is_fp8_kvcache=True,
                                         indices=np.ascontiguousarray(main[1][..., :64]))
    with pytest.raises(tessera.InvalidArgumentError, match=r"sched_meta\.config\.b "):
        flash_mla.flash_mla_with_kvcache(q[:1], main[0], None, None, 512, meta, is_fp8_kvcache=True,
                                         indices=np.ascontiguousarray(main[1][:1]))
    with pytest.raises(ValueError, match="num_splits"):
        flash_mla.flash_mla_with_kvcache(q, main[0], None, None, 512, meta, np.zeros(3, np.int32),
                                         is_fp8_kvcache=True, indices=main[1])


def test_bitwise_identical_across_thread_counts(rng, isa):
    q, main, extra = sparse_problem(rng, False, 1, 2, 64, 2048, extra_topk=128)
    qd, cache, bt, seqlens, _ = dense_problem(rng, 2, 2, 16, 1, 576, [2500, 900])
    results = []
    try:
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            meta, _ = flash_mla.get_mla_metadata()
            o1, l1 = flash_mla.flash_mla_with_kvcache(q, main[0], None, None, 512, meta, is_fp8_kvcache=True,
                                                      indices=main[1], extra_k_cache=extra[0],
                                                      extra_indices_in_kvcache=extra[1])
            meta2, _ = flash_mla.get_mla_metadata()
            o2, l2 = flash_mla.flash_mla_with_kvcache(qd, cache, bt, seqlens, 512, meta2, causal=True)
            results.append((o1.view(np.uint16).copy(), l1.copy(), o2.view(np.uint16).copy(), l2.copy()))
    finally:
        tessera.set_num_threads(0)
    for r in results[1:]:
        for a, b in zip(results[0], r):
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_bad_arguments_name_the_argument(rng):
    q, cache, bt, seqlens, _ = dense_problem(rng, 2, 1, 16, 1, 576, [70, 10])
    meta, _ = flash_mla.get_mla_metadata()
    cases = [
        (dict(q=q.astype(np.float32)), "'q'"),
        (dict(cache_seqlens=np.array([70, 10**6], np.int32)), "cache_seqlens[1]"),
        (dict(block_table=np.where(bt == bt[0, 1], 99999, bt).astype(np.int32)), "block_table[0, 1]"),
        (dict(head_dim_v=1000), "'head_dim_v'"),
        (dict(attn_sink=np.zeros(16, np.float32)), "'attn_sink'"),
    ]
    for change, needle in cases:
        args = dict(q=q, k_cache=cache, block_table=bt, cache_seqlens=seqlens, head_dim_v=512,
                    tile_scheduler_metadata=flash_mla.get_mla_metadata()[0])
        args.update(change)
        with pytest.raises(ValueError) as err:
            flash_mla.flash_mla_with_kvcache(**args)
        assert needle in str(err.value) and "flash_mla_with_kvcache" in str(err.value)
    with pytest.raises(tessera.NotImplementedInTessera):
        flash_mla.flash_mla_with_kvcache(q, cache, bt, seqlens, 512, meta, is_fp8_kvcache=True)
