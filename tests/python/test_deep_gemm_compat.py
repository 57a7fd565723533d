"""DeepGEMM names added for call-compatibility with its own test suite: testing helpers, the per-head
einsums' summation, the SM100 fp8_einsum expressions, the legacy grouped GEMMs, packed FP4 scales,
the psum scale layout's upper bounds and varlen paged logits. References are float64."""
import os

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import deep_gemm
from tessera.deep_gemm import testing

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn


def test_assert_bitwise_equal_label_and_calc_diff_of_zeros():
    x = np.zeros((2, 3), np.float32)
    assert testing.calc_diff(x, x) == 0.0  # DeepGEMM: all-zero inputs are identical, not 0/0
    y = x.copy()
    y[1, 1] = 1
    with pytest.raises(AssertionError, match=r"bitwise mismatch \(logits\): 1 of 6 elements differ"):
        testing.assert_bitwise_equal(x, y, "logits")


def test_filter_and_ignore_env(monkeypatch, capsys):
    ran = []
    skipped = testing.test_filter(lambda: False)(lambda: ran.append(1))
    kept = testing.test_filter(lambda: True)(lambda: ran.append(2) or "result")
    assert skipped() is None and kept() == "result" and ran == [2]
    assert "Filtered by" in capsys.readouterr().out
    monkeypatch.setenv("DG_SOMETHING", "1")
    seen = []
    testing.ignore_env("DG_SOMETHING", lambda: True)(lambda: seen.append(os.environ.get("DG_SOMETHING")))()
    assert seen == [None] and os.environ["DG_SOMETHING"] == "1"
    with pytest.raises(ZeroDivisionError):  # restored even when the test raises
        testing.ignore_env("DG_SOMETHING", lambda: True)(lambda: 1 / 0)()
    assert os.environ["DG_SOMETHING"] == "1"
    monkeypatch.setenv("TESSERA_ARCH_MAJOR", "9")
    assert testing.get_arch_major() == 9


def test_suppress_stdout_stderr_silences_and_restores(capfd):
    with testing.suppress_stdout_stderr():
        print("hidden")
        os.write(2, b"hidden too\n")
    print("shown")
    out, err = capfd.readouterr()
    assert out == "shown\n" and err == ""
    with testing.empty_suppress() as s:
        assert s is not None



def _fp32_chain(expr, x, y):
    """The per-head einsum summed as DeepGEMM does: one float32 chain per output over the contracted
    dimension in order (bf16 x bf16 products are exact in float32)."""
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    if expr == "bhr,hdr->bhd":
        prods = xf[:, :, None, :] * yf[None]  # [b, h, d, r]
    else:
        prods = np.moveaxis(xf[:, :, :, None] * yf[None], 2, 3)  # [b, h, r, d]
    acc = np.zeros(prods.shape[:3], np.float32)
    for k in range(prods.shape[3]):
        acc += prods[..., k]
    return acc


@pytest.mark.parametrize("expr", ["bhr,hdr->bhd", "bhd,hdr->bhr"])
def test_head_einsum_sums_one_fp32_chain_per_output(rng, expr):
    b, h, r, d = 5, 3, 300, 24
    x = rng.standard_normal((b, h, r if expr == "bhr,hdr->bhd" else d)).astype(BF16)
    yfull = rng.standard_normal((h, d, r + 16)).astype(BF16)
    y = yfull[:, :, :r]  # a view with a padded row stride, as DeepGEMM's test passes
    out_shape = (b, h, d) if expr == "bhr,hdr->bhd" else (b, h, r)
    chain = _fp32_chain(expr, x, y)
    z = np.full(out_shape, np.nan, BF16)
    deep_gemm.einsum(expr, x, y, z)
    assert np.array_equal(z.view(np.uint16), chain.astype(BF16).view(np.uint16))
    z32 = np.full(out_shape, np.nan, np.float32)
    deep_gemm.einsum(expr, x, y, z32)
    assert np.array_equal(z32, chain)
    exact = np.einsum(expr, x.astype(np.float64), y.astype(np.float64))
    assert np.abs(z32 - exact).max() <= 1e-4 * np.abs(exact).max()
    with pytest.raises(ValueError, match="einsum: argument 'b' dimension 0 must be H = 3"):
        deep_gemm.einsum(expr, x, y[:2], z)
    with pytest.raises(ValueError, match="takes no 'c'"):
        deep_gemm.einsum(expr, x, y, z, c=z)


def _fp8_token(x, gran=128):
    """Per-token FP8 of a float64 [rows, k] matrix: (e4m3, float32 power-of-two scales [rows, ceil(k/gran)])."""
    rows, k = x.shape
    pad = np.zeros((rows, -(-k // gran) * gran))
    pad[:, :k] = x
    amax = np.maximum(np.abs(pad.reshape(rows, -1, gran)).max(axis=2), 1e-4)
    sf = np.exp2(np.ceil(np.log2(amax / 448.0))).astype(np.float32)
    q = (pad.reshape(rows, -1, gran) / sf[:, :, None]).reshape(rows, -1)[:, :k].astype(E4M3)
    return q, sf


def _deq(q, sf, axis, gran=128):
    return q.astype(np.float64) * np.repeat(sf.astype(np.float64), gran, axis=axis).take(
        np.arange(q.shape[axis]), axis=axis)


def test_fp8_einsum_bhd_hdr_bhr_matches_float64(rng):
    b, h, d, r = 4, 2, 256, 200
    xq, xs = _fp8_token(rng.standard_normal((b * h, d)))
    xq, xs = xq.reshape(b, h, d), xs.reshape(b, h, -1)
    yq = rng.standard_normal((h, d, r)).astype(E4M3)
    ys = np.exp2(rng.integers(-3, 3, (h, 2, 2))).astype(np.float32)
    z = np.empty((b, h, r), np.float32)
    deep_gemm.fp8_einsum("bhd,hdr->bhr", (xq, xs), (yq, ys), z)
    ydeq = yq.astype(np.float64) * np.repeat(np.repeat(ys.astype(np.float64), 128, 1)[:, :d], 128, 2)[:, :, :r]
    want = np.einsum("bhd,hdr->bhr", _deq(xq, xs, 2), ydeq)
    assert np.array_equal(z, want.astype(np.float32))
    c = rng.standard_normal((b, h, r)).astype(np.float32)
    z2 = c.copy()
    deep_gemm.fp8_einsum("bhd,hdr->bhr", (xq, xs), (yq, ys), z2, z2)
    assert np.array_equal(z2, (want + c.astype(np.float64)).astype(np.float32))
    with pytest.raises(ValueError, match=r"fp8_einsum: argument 'b.scale' must have shape \[2, 2, 2\]"):
        deep_gemm.fp8_einsum("bhd,hdr->bhr", (xq, xs), (yq, ys[:, :1]), z)


def test_fp8_einsum_bhd_bhr_hdr_accumulates_per_128_tokens(rng):
    b, h, d, r = 300, 2, 16, 24
    xq = rng.standard_normal((b, h, d)).astype(E4M3)
    yq = rng.standard_normal((b, h, r)).astype(E4M3)
    xs = np.exp2(rng.integers(-2, 3, (3, h, d))).astype(np.float32)
    ys = np.exp2(rng.integers(-2, 3, (3, h, r))).astype(np.float32)
    z0 = rng.standard_normal((h, d, r)).astype(np.float32)
    z = z0.copy()
    deep_gemm.fp8_einsum("bhd,bhr->hdr", (xq, xs), (yq, ys), z, z, recipe=(1, 1, 128))
    want = z0.astype(np.float64) + np.einsum("bhd,bhr->hdr", _deq(xq, xs, 0), _deq(yq, ys, 0))
    assert np.array_equal(z, want.astype(np.float32))
    with pytest.raises(ValueError, match=r"argument 'recipe' must be \(1, 1, 128\)"):
        deep_gemm.fp8_einsum("bhd,bhr->hdr", (xq, xs), (yq, ys), z, z)


def test_legacy_grouped_gemms_match_float64(rng):
    from tessera.deep_gemm import legacy

    g, n, k = 3, 16, 64
    idx = np.repeat(np.array([0, -1, 2, 1], np.int32), 8)
    m = idx.size
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((g, n, k)).astype(BF16)
    d = np.full((m, n), 7, BF16)
    legacy.m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, idx)
    ref = np.stack([a[i].astype(np.float64) @ b[j].astype(np.float64).T if j >= 0 else np.zeros(n)
                    for i, j in enumerate(idx)])
    assert np.array_equal(d.view(np.uint16), ref.astype(np.float32).astype(BF16).view(np.uint16))
    rows = np.arange(m, dtype=np.int32)[::-1].copy()
    d2 = np.empty((m, n), BF16)
    legacy.a_fused_m_grouped_bf16_gemm_nn_contiguous_tl(a, np.swapaxes(b, 1, 2).copy(), d2, (idx, rows))
    ref2 = np.stack([a[rows[i]].astype(np.float64) @ b[j].astype(np.float64).T if j >= 0 else np.zeros(n)
                     for i, j in enumerate(idx)])
    assert np.array_equal(d2.view(np.uint16), ref2.astype(np.float32).astype(BF16).view(np.uint16))
    # K-grouped: group 1 is empty; b rows gathered through k_indices, -1 skipped.
    kt, mm = 40, 8
    a_k = rng.standard_normal((kt, mm)).astype(BF16)
    b_k = rng.standard_normal((kt, n)).astype(BF16)
    k_idx = np.arange(kt, dtype=np.int32)[::-1].copy()
    k_idx[5] = -1
    ks, ke = np.array([0, 16, 16], np.int32), np.array([16, 16, 40], np.int32)
    c = rng.standard_normal((3, mm, n)).astype(np.float32)
    c0 = c.copy()
    legacy.b_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a_k, b_k, c, (k_idx, ks, ke), True)
    for grp in range(3):
        sel = [j for j in range(ks[grp], ke[grp]) if k_idx[j] >= 0]
        want = c0[grp].astype(np.float64) + a_k[sel].astype(np.float64).T @ b_k[k_idx[sel]].astype(np.float64)
        assert np.allclose(c[grp], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"m_grouped_bf16_gemm_nt_contiguous_tl: argument 'm_indices' must be in \[-1, 3\)"):
        legacy.m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, idx + 5)


def test_packed_fp4_scales_pad_to_four():
    x = np.linspace(-3, 3, 2 * 64).reshape(2, 64).astype(np.float32)  # 2 scales per row with gran_k 32
    q, sf = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32)
    q2, packed = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
    assert packed.shape == (2, 1) and packed.dtype == np.int32 and np.array_equal(q, q2)
    unpacked = deep_gemm.unpack_ue8m0_from_int(packed)
    assert np.array_equal(unpacked[:, :2], sf) and np.all(unpacked[:, 2:] == 1.0)


def test_psum_scale_layout_accepts_upper_bounds():
    # DeepGEMM's GEMM path passes the aligned sizes (or nothing) as ks_cpu; the layout stays the truth.
    from tessera.deep_gemm.utils import align

    gran, k_align = 32, 128
    real = [100, 64, 40]
    ends, prev = [], 0
    for k in real:
        prev = align(prev, k_align) + k
        ends.append(prev)
    layout = np.array(ends, np.int32)
    rows = sum(-(-k // gran) for k in real)
    sf = np.exp2(np.arange(rows * 8).reshape(rows, 8) % 5).astype(np.float32)
    fn = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor
    exact = fn(sf, layout, real, gran, k_align, use_psum_layout=True)
    for ks in ([align(k, k_align) for k in real], None, []):
        assert np.array_equal(fn(sf, layout, ks, gran, k_align, use_psum_layout=True), exact)
    with pytest.raises(ValueError, match="'ks_cpu' entry 0 = 96 is below the psum layout's K of group 0 = 100"):
        fn(sf, layout, [96, 64, 40], gran, k_align, use_psum_layout=True)


def test_varlen_paged_logits_equal_the_rows_alone(rng):
    block, d, h = 16, 64, 4
    lens = np.array([20, 21, 22, 9], np.int32)  # rows 0-2: one sequence's tokens, row 3: another
    indices = np.array([0, 0, 0, 1], np.int32)
    pages = 6
    cache = np.zeros((pages, block, 1, d + 4), np.uint8)
    vals = rng.standard_normal((pages, block, d)).astype(E4M3)
    flat = cache.reshape(pages, -1)
    flat[:, :block * d] = vals.view(np.uint8).reshape(pages, -1)
    flat[:, block * d:] = np.ones((pages, block), np.float32).view(np.uint8).reshape(pages, -1)
    table = np.array([[0, 1], [0, 1], [0, 1], [4, 5]], np.int32)
    q = rng.standard_normal((4, 1, h, d)).astype(E4M3)
    w = rng.standard_normal((4, h)).astype(np.float32)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, block, 2)
    plain = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, 32, clean_logits=True)
    meta_v = deep_gemm.get_paged_mqa_logits_metadata(lens, block, 2, indices=indices)
    varlen = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, meta_v, 32, clean_logits=True, indices=indices)
    assert np.array_equal(meta, meta_v) and np.array_equal(plain, varlen)
    for i in range(4):  # float64 reference of each row
        kv = vals[table[i]].reshape(-1, d).astype(np.float64)[:lens[i]]
        s = np.maximum(q[i, 0].astype(np.float64) @ kv.T, 0) * w[i, :, None]
        assert np.allclose(varlen[i, :lens[i]], s.sum(0), rtol=1e-5, atol=1e-4)
        assert np.all(np.isneginf(varlen[i, lens[i]:]))
    with pytest.raises(ValueError, match="next_n must be 1"):
        deep_gemm.fp8_paged_mqa_logits(q.reshape(2, 2, h, d), cache, w, lens[:2], table[:2], meta, 32,
                                       indices=indices[:2])


def test_fp4_weights_on_avx2_match_float64(rng):
    # AVX2's packed kernels take e4m3 but not FP4: the driver widens FP4 operands exactly to e4m3 (they
    # used to fall back to the scalar reference). The result must still be the float64 product.
    if "avx2" not in tessera.cpu_info()["features"]:
        pytest.skip("this CPU lacks avx2")
    m, n, k, groups = 256, 48, 256, 2
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((groups, n, k))
    aq, asf = deep_gemm.per_token_cast_to_fp8(a.astype(np.float32), use_ue8m0=True)
    bq = np.empty((groups, n, k // 2), np.int8)
    bsf = np.empty((groups, n, k // 32), np.float32)
    for g in range(groups):
        bq[g], bsf[g] = deep_gemm.per_token_cast_to_fp4(b[g].astype(np.float32), use_ue8m0=True, gran_k=32)
    layout = np.repeat(np.arange(groups, dtype=np.int32), m // groups)
    tessera.set_isa("avx2")
    try:
        d = np.empty((m, n), BF16)
        deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous((aq, asf), (bq, bsf), d, layout, recipe_a=(1, 128),
                                                       recipe_b=(1, 32))
    finally:
        tessera.set_isa(None)
    a_deq = aq.astype(np.float64) * np.repeat(asf.astype(np.float64), 128, axis=1)
    for g in range(groups):
        b_deq = deep_gemm.cast_back_from_fp4(bq[g], bsf[g], gran_k=32).astype(np.float64)
        rows = layout == g
        want = a_deq[rows] @ b_deq.T
        # one bf16 rounding of the fp32 sum: within 2^-8 relative, plus fp32 accumulation noise
        assert np.all(np.abs(d[rows].astype(np.float64) - want) <= 2.0 ** -8 * np.abs(want) + 1e-4 * np.abs(want).max())
