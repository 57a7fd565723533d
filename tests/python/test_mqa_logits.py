"""tessera.deep_gemm MQA logits with the anchor's checks (DeepGEMM tests/test_attention.py): exact -inf
masks, calc_diff < 1e-3 against the unquantised reference and ~0 against the dequantised one, compressed
mode, context-parallel ranges, paged FP8 cache with random block tables; plus MX FP8 / FP4, bf16 logits,
non-contiguous q, 20 repeated calls and 1/2/3 threads bitwise equal, and bad input."""
import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import deep_gemm
from tessera.deep_gemm.testing import calc_diff
from tessera.deep_gemm.utils import per_custom_dims_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
BF16 = np.dtype(ml_dtypes.bfloat16)


def ref_logits(q, kv, weights, ks, ke):
    """float64 reference: logits[i, j] = sum_h w[i, h] relu(q[i, h] . kv[j]) for ks <= j < ke, else -inf."""
    s_kv = kv.shape[0]
    score = np.einsum("mhd,nd->mhn", q.astype(np.float64), kv.astype(np.float64))
    logits = (np.maximum(score, 0) * weights.astype(np.float64)[:, :, None]).sum(axis=1)
    j = np.arange(s_kv)[None, :]
    mask = (j >= ks[:, None]) & (j < ke[:, None])
    return np.where(mask, logits, -np.inf), mask


def check_against(logits, ref, mask, bound):
    got = np.asarray(logits).astype(np.float64)
    assert np.array_equal(got == -np.inf, ~mask), "the -inf mask must match exactly"
    diff = calc_diff(np.where(mask, got, 0), np.where(mask, ref, 0))
    assert diff < bound, f"calc_diff {diff} >= {bound}"


def cp_ranges(s, s_kv):
    """The anchor's context-parallel ranges: two chunks of queries seeing two different prefixes."""
    chunk, cp_size = s // 2, s_kv // s
    cp_id = cp_size // 3
    ks = np.zeros(s, np.int32)
    ke = np.zeros(s, np.int32)
    for i in range(chunk):
        ke[i] = cp_id * chunk + i
        ke[i + chunk] = (cp_size * 2 - 1 - cp_id) * chunk + i
    return ks, ke


@pytest.mark.parametrize("heads,dim", [(64, 128), (32, 64), (8, 32)])
@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("cp", [False, True])
def test_fp8_mqa_logits(rng, heads, dim, compressed, cp):
    s, s_kv = 32, 128
    q = rng.standard_normal((s, heads, dim)).astype(BF16)
    kv = rng.standard_normal((s_kv, dim)).astype(BF16)
    weights = rng.standard_normal((s, heads)).astype(np.float32)
    ks, ke = cp_ranges(s, s_kv) if cp else (np.zeros(s, np.int32), (np.arange(s) + s_kv - s + 1).astype(np.int32))
    q_fp8 = q.astype(E4M3)
    kv_fp8 = per_custom_dims_cast_to_fp8(kv, (0,), False)
    if compressed:
        max_k = int((ke - ks).max())
        out = deep_gemm.fp8_mqa_logits(q_fp8, kv_fp8, weights, ks, ke, max_seqlen_k=max_k, clean_logits=False)
        assert out.shape == (s, max_k)
        logits = np.full((s, s_kv), -np.inf)
        for i in range(s):
            logits[i, ks[i]:ke[i]] = out[i, :ke[i] - ks[i]]
    else:
        logits = deep_gemm.fp8_mqa_logits(q_fp8, kv_fp8, weights, ks, ke)
        assert logits.shape == (s, s_kv) and logits.dtype == np.float32
    ref, mask = ref_logits(q, kv, weights, ks, ke)
    check_against(logits, ref, mask, 1e-3)
    deq_kv = kv_fp8[0].astype(np.float64) * kv_fp8[1][:, None]
    ref_deq, _ = ref_logits(q_fp8, deq_kv, weights, ks, ke)
    check_against(logits, ref_deq, mask, 5e-6)


@pytest.mark.parametrize("fmt", ["mxfp8", "mxfp4"])
def test_fp8_fp4_mqa_logits_mx(rng, fmt):
    s, s_kv, heads, dim = 20, 90, 16, 128
    q = rng.standard_normal((s, heads, dim)).astype(np.float32)
    kv = rng.standard_normal((s_kv, dim)).astype(np.float32)
    weights = rng.standard_normal((s, heads)).astype(np.float32)
    ks = rng.integers(0, s_kv // 2, s).astype(np.int32)
    ke = (ks + rng.integers(0, s_kv // 2, s)).astype(np.int32)
    if fmt == "mxfp4":
        q_data, q_sf = per_token_cast_to_fp4(q.reshape(s * heads, dim), True, 32, True)
        kv_data, kv_sf = per_token_cast_to_fp4(kv, True, 32, True)
        q_data = q_data.reshape(s, heads, dim // 2)
        deq = deep_gemm.utils.cast_back_from_fp4
        q_deq = deq(q_data.reshape(s * heads, dim // 2), q_sf, 32, True).reshape(s, heads, dim)
        kv_deq = deq(kv_data, kv_sf, 32, True)
    else:
        q_data, q_sf = per_token_cast_to_fp8(q.reshape(s * heads, dim), True, 32, True)
        kv_data, kv_sf = per_token_cast_to_fp8(kv, True, 32, True)
        q_data = q_data.reshape(s, heads, dim)
        unpack = lambda sf: np.repeat((sf.view(np.uint8).astype(np.int32) << 23).view(np.float32), 32, axis=1)
        q_deq = (q_data.reshape(s * heads, dim).astype(np.float32) * unpack(q_sf)).reshape(s, heads, dim)
        kv_deq = kv_data.astype(np.float32) * unpack(kv_sf)
    logits = deep_gemm.fp8_fp4_mqa_logits((q_data, q_sf.reshape(s, heads)), (kv_data, kv_sf.reshape(s_kv)), weights,
                                          ks, ke)
    ref, mask = ref_logits(q_deq, kv_deq, weights, ks, ke)
    check_against(logits, ref, mask, 5e-6)
    ref_raw, _ = ref_logits(q, kv, weights, ks, ke)
    check_against(logits, ref_raw, mask, 2e-2 if fmt == "mxfp4" else 1e-3)


def test_bf16_logits_noncontiguous_q_and_determinism(rng):
    s, s_kv, heads, dim = 24, 200, 64, 128
    q_t = rng.standard_normal((heads, s, dim)).astype(E4M3)  # stored [H, S, D]
    q = q_t.transpose(1, 0, 2)  # viewed [S, H, D]: not contiguous
    kv = per_custom_dims_cast_to_fp8(rng.standard_normal((s_kv, dim)).astype(np.float32), (0,), False)
    weights = rng.standard_normal((s, heads)).astype(np.float32)
    ks = np.zeros(s, np.int32)
    ke = rng.integers(0, s_kv + 1, s).astype(np.int32)
    bf = deep_gemm.fp8_fp4_mqa_logits((q, None), kv, weights.astype(BF16), ks, ke, logits_dtype=BF16)
    assert bf.dtype == BF16
    deq_kv = kv[0].astype(np.float64) * kv[1][:, None]
    ref, mask = ref_logits(q, deq_kv, weights.astype(BF16), ks, ke)
    check_against(bf, ref, mask, 5e-6)
    first = deep_gemm.fp8_mqa_logits(q, kv, weights, ks, ke)
    for _ in range(20):
        assert np.array_equal(deep_gemm.fp8_mqa_logits(q, kv, weights, ks, ke).view(np.uint32), first.view(np.uint32))
    for threads in (1, 2, 3):
        tessera.set_num_threads(threads)
        try:
            again = deep_gemm.fp8_mqa_logits(q, kv, weights, ks, ke)
        finally:
            tessera.set_num_threads(0)
        assert np.array_equal(again.view(np.uint32), first.view(np.uint32)), f"threads={threads}"


def kv_cache_cast_to_fp8(x):
    """The anchor's paged cache: per page, block_size * D e4m3 bytes then block_size float32 scales."""
    num_blocks, block_size, _, dim = x.shape
    sf = np.maximum(np.abs(x).max(axis=3, keepdims=True), 1e-4).astype(np.float32) / np.float32(448)
    scaled = (x * (np.float32(1) / sf)).astype(E4M3)
    out = np.empty((num_blocks, block_size * (dim + 4)), np.uint8)
    out[:, :block_size * dim] = scaled.reshape(num_blocks, block_size * dim).view(np.uint8)
    out[:, block_size * dim:] = sf.reshape(num_blocks, block_size).view(np.uint8)
    return out.reshape(num_blocks, block_size, 1, dim + 4), scaled.astype(np.float64) * sf


@pytest.mark.parametrize("lens_2d", [False, True])
@pytest.mark.parametrize("batch,next_n,block", [(5, 1, 64), (3, 2, 32), (4, 4, 16)])
def test_fp8_paged_mqa_logits(rng, lens_2d, batch, next_n, block):
    heads, dim, avg = 32, 128, 150
    context_lens = rng.integers(int(0.7 * avg), int(1.3 * avg), batch).astype(np.int32)
    context_lens[0] = next_n  # short request; with 2-D lengths some queries see 0 or 1 token
    max_len = int(context_lens.max()) + 7
    num_blocks = batch * (max_len // block + 2) + 3
    q = rng.standard_normal((batch, next_n, heads, dim)).astype(np.float32)
    cache, deq = kv_cache_cast_to_fp8(rng.standard_normal((num_blocks, block, 1, dim)).astype(np.float32))
    weights = rng.standard_normal((batch * next_n, heads)).astype(np.float32)
    max_blocks = (max_len + block - 1) // block
    block_table = np.full((batch, max_blocks), -1, np.int32)  # unused entries would crash a reader
    pool = rng.permutation(num_blocks).astype(np.int32)
    used = 0
    for b in range(batch):
        n = -(-int(context_lens[b]) // block)
        block_table[b, :n] = pool[used:used + n]
        used += n
    if lens_2d:
        lens = (rng.random((batch, next_n)) * (context_lens[:, None] + 1)).astype(np.int32)
        lens[:, -1] = context_lens
        lens[0, 0] = 0
        query_len = lens.reshape(-1)
    else:
        lens = context_lens
        query_len = np.maximum(0, np.repeat(context_lens, next_n) - next_n + np.tile(np.arange(next_n), batch) + 1)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, block, deep_gemm.get_num_sms())
    assert meta.shape == (deep_gemm.get_num_sms() + 1, 2) and meta.dtype == np.int32
    q_fp8 = q.astype(E4M3)
    logits = deep_gemm.fp8_paged_mqa_logits(q_fp8, cache, weights, lens, block_table, meta, max_len,
                                            clean_logits=not lens_2d)
    assert logits.shape == (batch * next_n, max_len)
    ref = np.full((batch * next_n, max_len), -np.inf)
    for b in range(batch):
        keys = deq[block_table[b, :-(-int(context_lens[b]) // block)]].reshape(-1, dim)
        for j in range(next_n):
            i = b * next_n + j
            n = int(query_len[i])
            score = np.einsum("hd,nd->hn", q_fp8[b, j].astype(np.float64), keys[:n])
            ref[i, :n] = (np.maximum(score, 0) * weights[i][:, None]).sum(axis=0)
    valid = np.arange(max_len)[None, :] < query_len[:, None]
    if not lens_2d:
        assert np.array_equal(logits == -np.inf, ~valid), "clean_logits: -inf exactly past each length"
    # Past each length the logits are unspecified without clean_logits (any bits): mask before casting.
    got = np.where(valid, logits, 0).astype(np.float64)
    assert calc_diff(got, np.where(valid, ref, 0)) < 5e-6
    first = np.where(valid, logits, 0).view(np.uint32).copy()
    for threads in (1, 2, 3):
        tessera.set_num_threads(threads)
        try:
            again = deep_gemm.fp8_paged_mqa_logits(q_fp8, cache, weights, lens, block_table, meta, max_len)
        finally:
            tessera.set_num_threads(0)
        assert np.array_equal(np.where(valid, again, 0).view(np.uint32), first)


def test_bad_input(rng):
    q = rng.standard_normal((4, 8, 64)).astype(E4M3)
    kv = per_custom_dims_cast_to_fp8(rng.standard_normal((30, 64)).astype(np.float32), (0,), False)
    w = np.ones((4, 8), np.float32)
    ks, ke = np.zeros(4, np.int32), np.full(4, 30, np.int32)
    with pytest.raises(ValueError, match="head_dim"):
        deep_gemm.fp8_mqa_logits(q[:, :, :48], (kv[0][:, :48], kv[1]), w, ks, ke)
    with pytest.raises(ValueError, match="'clean_logits' must be False"):
        deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, max_seqlen_k=30)
    with pytest.raises(ValueError, match="max_seqlen_k"):
        deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=False, max_seqlen_k=10)
    with pytest.raises(ValueError, match="'weights'"):
        deep_gemm.fp8_mqa_logits(q, kv, w[:, :4], ks, ke)
    with pytest.raises(ValueError, match="'logits_dtype'"):
        deep_gemm.fp8_fp4_mqa_logits((q, None), kv, w, ks, ke, logits_dtype=np.float16)
    with pytest.raises(ValueError, match="bfloat16 only with bfloat16 logits"):
        deep_gemm.fp8_fp4_mqa_logits((q, None), kv, w.astype(BF16), ks, ke)
    with pytest.raises(TypeError, match="pair"):
        deep_gemm.fp8_mqa_logits(q, kv[0], w, ks, ke)
    cache = np.zeros((4, 16, 1, 68), np.uint8)
    qp = rng.standard_normal((2, 1, 8, 64)).astype(E4M3)
    lens = np.array([20, 5], np.int32)
    table = np.array([[0, 9], [1, 2]], np.int32)  # request 0 reads page 9: out of range
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 16, 2)
    with pytest.raises(ValueError, match="'block_table' entry"):
        deep_gemm.fp8_paged_mqa_logits(qp, cache, np.ones((2, 8), np.float32), lens, table, meta, 32)
    with pytest.raises(ValueError, match="'indices' must be >= 0 and non-decreasing"):
        deep_gemm.fp8_paged_mqa_logits(qp, cache, np.ones((2, 8), np.float32), lens, table, meta, 32,
                                       indices=np.array([1, 0], np.int32))
    with pytest.raises(ValueError, match=r"'indices' must be int32 \[2\]"):
        deep_gemm.get_paged_mqa_logits_metadata(lens, 16, 2, indices=np.zeros(3, np.int32))
