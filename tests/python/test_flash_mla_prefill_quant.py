"""tessera.flash_mla sparse prefill (out, max_logits, lse) against float64 with invalid and short index lists,
dense varlen prefill (flash_attn_varlen_func and its packed forms) against float64, and the FP8 KV-cache
quantiser byte for byte against the spec."""
import numpy as np
import pytest

import tessera
from tessera import flash_mla
from flash_mla_reference import (BF16, E4M3, PREFILL_OUT, PREFILL_STAT, assert_close, attention, layout_meta,
                                 spec_dequantize, spec_quantize_tokens, token_bytes)


@pytest.fixture(params=["scalar", "avx512bf16"])
def isa(request):
    if request.param == "avx512bf16" and "avx512_bf16" not in tessera.cpu_info()["features"]:
        pytest.skip("this CPU lacks avx512_bf16")
    tessera.set_isa(request.param)
    yield request.param
    tessera.set_isa(None)


@pytest.mark.parametrize("h_q,h_kv,d,topk_length,sink", [(64, 1, 576, False, False), (128, 1, 512, True, True),
                                                          (32, 2, 576, False, True)])
def test_sparse_prefill_matches_float64(rng, isa, h_q, h_kv, d, topk_length, sink):
    s_q, s_kv, topk = 3, 1000, 768
    q = rng.standard_normal((s_q, h_q, d)).astype(BF16)
    kv = rng.standard_normal((s_kv, h_kv, d)).astype(BF16)
    referenced = rng.random(s_kv) < 0.7
    kv[~referenced] = np.nan
    idx = rng.choice(np.flatnonzero(referenced), size=(s_q, h_kv, topk)).astype(np.int32)
    mask = rng.random(idx.shape) < 0.2
    idx[mask] = rng.choice(np.array([-1, -5, s_kv, s_kv + 9, 2**31 - 1], np.int32), size=int(mask.sum()))
    idx[1] = -1  # query 1 has no valid index
    lengths = rng.integers(topk // 2, topk, s_q).astype(np.int32) if topk_length else None
    sinks = rng.uniform(-1, 3, h_q).astype(np.float32) if sink else None
    if sink:
        sinks[0] = np.inf
    scale = d ** -0.5
    out, max_logits, lse = flash_mla.flash_mla_sparse_fwd(q, kv, idx, scale, attn_sink=sinks, topk_length=lengths)
    assert out.shape == (s_q, h_q, 512) and out.dtype == BF16 and max_logits.shape == lse.shape == (s_q, h_q)
    ref = np.zeros((s_q, h_q, 512)), np.zeros((s_q, h_q)), np.zeros((s_q, h_q))
    per_kv = h_q // h_kv
    for s in range(s_q):
        for g in range(h_kv):
            sel = idx[s, g][: lengths[s] if topk_length else topk]
            sel = sel[(sel >= 0) & (sel < s_kv)]
            heads = slice(g * per_kv, (g + 1) * per_kv)
            o, l, m = attention(q[s, heads].astype(np.float64), kv[sel, g].astype(np.float64), 512, scale,
                                None if sinks is None else sinks[heads])
            ref[0][s, heads], ref[2][s, heads], ref[1][s, heads] = o, l, m
    assert_close("out", out.astype(np.float64), ref[0], PREFILL_OUT)
    assert_close("max_logits", max_logits, ref[1], PREFILL_STAT)
    assert_close("lse", lse, ref[2], PREFILL_STAT)
    assert np.isneginf(max_logits[1]).all() and np.isposinf(lse[1]).all() and (out[1].astype(float) == 0).all()


@pytest.mark.parametrize("model1", [False, True], ids=["V32", "MODEL1"])
def test_quantize_k_cache_matches_the_spec_bytes(rng, model1):
    d, nope = layout_meta(model1)[:2]
    layout = flash_mla.FP8KVCacheLayout.MODEL1_FP8Sparse if model1 else flash_mla.FP8KVCacheLayout.V32_FP8Sparse
    assert layout.get_meta()[:2] == (d, nope)
    k = (rng.standard_normal((3, 5, 1, d)) * 3).astype(BF16)
    k[0, 1, 0, :100] = 0          # an all-zero tile: scale 2^-13
    k[1, 2, 0, 7] = 1e6           # a large amax
    cache = flash_mla.quantize_k_cache(k, layout)
    assert cache.shape == (3, 5, 1, 584 if model1 else 656) and cache.dtype == E4M3
    assert cache.strides[0] > 5 * cache.shape[3]  # padded blocks like FlashMLA's reference
    values, scales, rope = token_bytes(cache, model1)
    want_values, want_scales = spec_quantize_tokens(k.reshape(-1, d), model1)
    assert np.array_equal(values, want_values)
    assert np.array_equal(scales, want_scales)
    assert np.array_equal(rope.view(np.uint16), k.reshape(-1, d)[:, nope:].view(np.uint16))
    back = flash_mla.dequantize_k_cache(cache, layout)
    assert back.dtype == BF16 and back.shape == k.shape
    assert np.array_equal(back.reshape(-1, d).astype(np.float64), spec_dequantize(cache, model1))


def test_quantiser_and_prefill_refuse_bad_input(rng):
    k = rng.standard_normal((2, 4, 1, 576)).astype(BF16)
    with pytest.raises(ValueError, match="'input_k_cache'.*512"):
        flash_mla.quantize_k_cache(k, flash_mla.FP8KVCacheLayout.MODEL1_FP8Sparse)
    with pytest.raises(tessera.InvalidArgumentError, match="kvcache_layout"):
        flash_mla.quantize_k_cache(k, "V32")
    q = rng.standard_normal((2, 64, 576)).astype(BF16)
    kv = rng.standard_normal((10, 1, 512)).astype(BF16)
    idx = np.zeros((2, 1, 8), np.int32)
    with pytest.raises(ValueError, match="flash_mla_sparse_fwd: argument 'kv'"):
        flash_mla.flash_mla_sparse_fwd(q, kv, idx, 0.1)
    with pytest.raises(ValueError, match=r"argument 'topk_length': topk_length\[0\] = 9"):
        flash_mla.flash_mla_sparse_fwd(q, np.zeros((10, 1, 576), BF16), idx, 0.1,
                                       topk_length=np.array([9, 1], np.int32))


def varlen_reference(q, k, v, q_lens, kv_lens, causal):
    total_q, h_q, d_qk = q.shape
    h_kv = k.shape[1]
    out, lse = np.zeros((total_q, h_q, v.shape[2])), np.zeros((total_q, h_q))
    q0 = k0 = 0
    for n_q, n_kv in zip(q_lens, kv_lens):
        for j in range(n_q):
            limit = min(max(n_kv - n_q + j + 1, 0), n_kv) if causal else n_kv
            for h in range(h_q):
                g = h // (h_q // h_kv)
                keys = np.concatenate([k[k0:k0 + limit, g], v[k0:k0 + limit, g]], axis=1).astype(np.float64)
                qx = np.concatenate([q[q0 + j, h].astype(np.float64), np.zeros(v.shape[2])])[None, :]
                o, l, _ = attention(qx, keys, keys.shape[1], d_qk ** -0.5)
                out[q0 + j, h], lse[q0 + j, h] = o[0, d_qk:], l[0]
        q0, k0 = q0 + n_q, k0 + n_kv
    return out, lse


@pytest.mark.parametrize("h_q,h_kv,d_qk,causal", [(8, 8, 192, True), (8, 2, 128, False)])
def test_varlen_prefill_matches_float64(rng, isa, h_q, h_kv, d_qk, causal):
    q_lens, kv_lens = [30, 0, 45], [600, 0, 800]
    q = rng.standard_normal((sum(q_lens), h_q, d_qk)).astype(BF16)
    k = rng.standard_normal((sum(kv_lens), h_kv, d_qk)).astype(BF16)
    v = rng.standard_normal((sum(kv_lens), h_kv, 128)).astype(BF16)
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_kv = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    out, lse = flash_mla.flash_attn_varlen_func(q, k, v, cu_q, cu_kv, max(q_lens), max(kv_lens), causal=causal)
    assert out.shape == (sum(q_lens), h_q, 128) and lse.shape == (sum(q_lens), h_q) and lse.strides[0] == 4
    ref_out, ref_lse = varlen_reference(q, k, v, q_lens, kv_lens, causal)
    assert_close("out", out.astype(np.float64), ref_out, PREFILL_OUT)
    assert_close("lse", lse, ref_lse, (1e-6, 8.01 / 65536, 1e-10))
    # The packed forms slice the same tensors.
    kv = np.concatenate([k, v], axis=2)
    out2, lse2 = flash_mla.flash_attn_varlen_kvpacked_func(q, kv, cu_q, cu_kv, max(q_lens), max(kv_lens), d_qk,
                                                           causal=causal)
    assert np.array_equal(out.view(np.uint16), out2.view(np.uint16)) and np.array_equal(lse, lse2)


def test_fixed_length_hint_gives_the_varlen_result(rng):
    # is_varlen=False (FlashMLA: every request has the same lengths) is a hint; the bits must not change.
    q = rng.standard_normal((2 * 30, 4, 128)).astype(BF16)
    k = rng.standard_normal((2 * 600, 2, 128)).astype(BF16)
    v = rng.standard_normal((2 * 600, 2, 128)).astype(BF16)
    cu_q, cu_kv = np.array([0, 30, 60], np.int32), np.array([0, 600, 1200], np.int32)
    for causal in (False, True):
        o1, l1 = flash_mla.flash_attn_varlen_func(q, k, v, cu_q, cu_kv, 30, 600, causal=causal)
        o2, l2 = flash_mla.flash_attn_varlen_func(q, k, v, cu_q, cu_kv, 30, 600, causal=causal, is_varlen=False)
        assert np.array_equal(o1.view(np.uint16), o2.view(np.uint16)) and np.array_equal(l1, l2)
        ref_out, ref_lse = varlen_reference(q, k, v, [30, 30], [600, 600], causal)
        assert_close("out", o2.astype(np.float64), ref_out, PREFILL_OUT)
        assert_close("lse", l2, ref_lse, (1e-6, 8.01 / 65536, 1e-10))


def test_varlen_prefill_options():
    q = np.zeros((4, 2, 128), BF16)
    cu = np.array([0, 4], np.int32)
    with pytest.raises(ValueError, match="dropout_p"):
        flash_mla.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, dropout_p=0.1)
    with pytest.raises(TypeError, match="argument 'is_varlen' must be a bool"):
        flash_mla.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, is_varlen="no")
    with pytest.raises(ValueError, match="max_seqlen_kv"):
        flash_mla.flash_attn_varlen_func(q, q, q, cu, cu, 4, 3)
    qkv = np.random.default_rng(0).standard_normal((4, 2, 3 * 128)).astype(BF16)
    o1, _ = flash_mla.flash_attn_varlen_qkvpacked_func(qkv, cu, 4, 128, causal=True)
    o2, _ = flash_mla.flash_attn_varlen_func(qkv[:, :, :128], qkv[:, :, 128:256], qkv[:, :, 256:], cu, cu, 4, 4,
                                             causal=True)
    assert np.array_equal(o1.view(np.uint16), o2.view(np.uint16))
