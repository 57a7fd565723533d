"""deep_gemm K-grouped GEMMs (DeepGEMM's API, docs/gemm.md): k_grouped_{bf16,fp8}_gemm_tn_contiguous with K sizes
(multiples of the alignment) or psum layouts (odd sizes, gaps, empty groups), per-channel scale
factors (gran_k 32 and 128, K tails) as float32 or packed UE8M0, c absent / separate / d itself,
DeepGEMM's SM90 form k_grouped_fp8_gemm_nt_contiguous, bitwise determinism, bad input."""
import numpy as np
import pytest

from grouped_helpers import BF16, POISON, assert_same_bits_across_threads, bits, check_diff, f64, mk_alignment
from tessera import deep_gemm

ALIGN = 32


def k_layout(logical_ks, alignment, psum):
    """Row ranges of the groups in A/B, grouped_layout, ks_cpu and the total row count. Without psum
    the sizes are the aligned ones (groups back to back); with psum groups start at aligned rows."""
    if not psum:
        ks = [-(-k // alignment) * alignment for k in logical_ks]
        starts = np.concatenate([[0], np.cumsum(ks)[:-1]]).astype(int).tolist()
        return list(zip(starts, ks)), np.array(ks, np.int32), ks, sum(ks)
    ranges, ends, end = [], [], 0
    for k in logical_ks:
        start = -(-end // alignment) * alignment
        end = start + k
        ranges.append((start, k))
        ends.append(end)
    return ranges, np.array(ends, np.int32), None, -(-end // alignment) * alignment


def per_channel_groups(x, ranges, gran_k, ue8m0):
    """Each group's rows [k_g, MN] quantised per channel in blocks of gran_k rows (last block padded):
    e4m3 rows in place, SF rows ceil(k_g/gran_k) per group stacked, float64 dequantised values."""
    q = np.zeros(x.shape, deep_gemm.per_token_cast_to_fp8(np.ones((1, 1), np.float32), False)[0].dtype)
    deq = np.zeros(x.shape)
    sfs = []
    for start, k in ranges:
        if k == 0:
            continue
        padded = np.zeros((-(-k // gran_k) * gran_k, x.shape[1]), np.float32)
        padded[:k] = x[start:start + k]
        qg, sf = deep_gemm.per_channel_cast_to_fp8(padded, use_ue8m0=ue8m0, gran_k=gran_k)
        q[start:start + k] = qg[:k]
        deq[start:start + k] = (f64(qg) * np.repeat(f64(sf), gran_k, axis=0))[:k]
        sfs.append(sf)
    return q, np.concatenate(sfs) if sfs else np.zeros((0, x.shape[1]), np.float32), deq


def c_and_d(rng, mode, shape):
    d = np.full(shape, POISON, np.float32)
    if mode == "none":
        return None, d, np.zeros(shape)
    c = (rng.standard_normal(shape) * 8).astype(np.float32)
    if mode == "is_d":
        d[...] = c
        return d, d, f64(c)
    return c, d, f64(c)


def reference(x, y, ranges, base):
    ref = base.copy()
    for g, (start, k) in enumerate(ranges):
        ref[g] += f64(x[start:start + k]).T @ f64(y[start:start + k])
    return ref


@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("c_mode", ["none", "separate", "is_d"])
def test_k_grouped_bf16(rng, psum, c_mode):
    logical_ks, m, n = [37, 0, 100, 64, 3], 24, 40
    with mk_alignment(ALIGN):
        ranges, grouped_layout, ks_cpu, total = k_layout(logical_ks, ALIGN, psum)
        a = np.zeros((total, m), BF16)
        b = np.zeros((total, n), BF16)
        for start, k in ranges:
            a[start:start + k] = rng.standard_normal((k, m)).astype(BF16)
            b[start:start + k] = rng.standard_normal((k, n)).astype(BF16)
        c, d, base = c_and_d(rng, c_mode, (len(logical_ks), m, n))
        assert deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks_cpu, grouped_layout, c=c,
                                                           use_psum_layout=psum) is None
    ref = reference(a, b, ranges, base)
    check_diff(d, ref, ref, 1e-5, f"k-grouped bf16 psum={psum} c={c_mode}", deq_threshold=1e-10)


@pytest.mark.parametrize("gran_k", [32, 128])
@pytest.mark.parametrize("sf_style", ["fp32", "ue8m0"])
@pytest.mark.parametrize("psum", [False, True])
def test_k_grouped_fp8_tn(rng, gran_k, sf_style, psum):
    logical_ks, m, n = [37, 0, 200, 64, 129], 24, 40  # tails of 32 and 128, an empty group
    ue8m0 = sf_style == "ue8m0"
    with mk_alignment(ALIGN):
        ranges, grouped_layout, ks_cpu, total = k_layout(logical_ks, ALIGN, psum)
        x = np.zeros((total, m), np.float32)
        y = np.zeros((total, n), np.float32)
        for start, k in ranges:
            x[start:start + k] = rng.standard_normal((k, m))
            y[start:start + k] = rng.standard_normal((k, n))
        qa, sfa, deq_a = per_channel_groups(x, ranges, gran_k, ue8m0)
        qb, sfb, deq_b = per_channel_groups(y, ranges, gran_k, ue8m0)
        if ue8m0:
            pack = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor
            sfa = pack(sfa, grouped_layout, ks_cpu, gran_k, ALIGN, use_psum_layout=psum)
            sfb = pack(sfb, grouped_layout, ks_cpu, gran_k, ALIGN, use_psum_layout=psum)
        c, d, base = c_and_d(rng, "is_d", (len(logical_ks), m, n))
        deep_gemm.k_grouped_fp8_gemm_tn_contiguous((qa, sfa), (qb, sfb), d, ks_cpu, grouped_layout, c=c,
                                                   recipe=(1, 1, gran_k), use_psum_layout=psum)
    check_diff(d, reference(x, y, ranges, base), reference(deq_a, deq_b, ranges, base), 1e-3,
               f"k-grouped fp8 tn gran_k={gran_k} {sf_style} psum={psum}", deq_threshold=1e-10)


def test_k_grouped_fp8_nt_sm90_form(rng):
    ks, m, n = [128, 0, 256, 384], 16, 24
    ranges = list(zip(np.concatenate([[0], np.cumsum(ks)[:-1]]).astype(int).tolist(), ks))
    total = sum(ks)
    x = rng.standard_normal((total, m)).astype(np.float32)
    y = rng.standard_normal((total, n)).astype(np.float32)
    qa, sfa, deq_a = per_channel_groups(x, ranges, 128, False)
    qb, sfb, deq_b = per_channel_groups(y, ranges, 128, False)
    # per group a K-major [MN, k_g] block, blocks one after another; SF given [MN, sum sf_k] (a view)
    flat_a = np.concatenate([qa[s:s + k].T.reshape(-1) for s, k in ranges])
    flat_b = np.concatenate([qb[s:s + k].T.reshape(-1) for s, k in ranges])
    c, d, base = c_and_d(rng, "is_d", (len(ks), m, n))
    deep_gemm.k_grouped_fp8_gemm_nt_contiguous((flat_a, sfa.T), (flat_b, sfb.T), d, ks, np.array(ks, np.int32), c=c)
    check_diff(d, reference(x, y, ranges, base), reference(deq_a, deq_b, ranges, base), 1e-3, "k-grouped fp8 nt",
               deq_threshold=1e-10)
    with pytest.raises(ValueError, match="'use_psum_layout' must be False"):
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous((flat_a, sfa.T), (flat_b, sfb.T), d, ks, np.array(ks, np.int32),
                                                   c=c, use_psum_layout=True)
    with pytest.raises(ValueError, match="same K sizes"):
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous((flat_a, sfa.T), (flat_b, sfb.T), d, ks,
                                                   np.array([128, 0, 384, 256], np.int32), c=c)


def test_k_grouped_is_bitwise_deterministic_across_threads(rng):
    logical_ks, m, n = [300, 17, 0, 256], 64, 96
    with mk_alignment(ALIGN):
        ranges, grouped_layout, ks_cpu, total = k_layout(logical_ks, ALIGN, True)
        x = np.zeros((total, m), np.float32)
        y = np.zeros((total, n), np.float32)
        for start, k in ranges:
            x[start:start + k] = rng.standard_normal((k, m))
            y[start:start + k] = rng.standard_normal((k, n))
        qa, sfa, _ = per_channel_groups(x, ranges, 128, False)
        qb, sfb, _ = per_channel_groups(y, ranges, 128, False)
        c = rng.standard_normal((len(logical_ks), m, n)).astype(np.float32)
        d = np.empty_like(c)

        def call():
            d[...] = POISON
            deep_gemm.k_grouped_fp8_gemm_tn_contiguous((qa, sfa), (qb, sfb), d, None, grouped_layout, c=c,
                                                       use_psum_layout=True)
            return d

        assert_same_bits_across_threads(call)


def test_k_grouped_rejects_bad_layouts(rng):
    m, n = 8, 16
    a = rng.standard_normal((96, m)).astype(BF16)
    b = rng.standard_normal((96, n)).astype(BF16)
    d = np.full((2, m, n), POISON, np.float32)
    before = bits(d).copy()
    fn = deep_gemm.k_grouped_bf16_gemm_tn_contiguous
    with mk_alignment(ALIGN):
        cases = [
            ([64, 40], np.array([64, 40], np.int32), False, "grouped_layout"),    # 40 not a multiple of 32
            ([64, 64], np.array([64, 64], np.int32), False, "K rows"),            # sizes exceed the 96 rows
            ([64], np.array([64], np.int32), False, "grouped_layout"),            # one group for a 2-group d
            ([64, 32], np.array([64, 0], np.int32), False, "ks"),                 # ks_cpu disagrees
            (None, np.array([90, 60], np.int32), True, "grouped_layout"),         # psum ends decreasing
            (None, np.array([32, 200], np.int32), True, "K rows"),                # psum end past the rows
        ]
        for ks_cpu, layout, psum, needle in cases:
            with pytest.raises(ValueError, match=needle) as info:
                fn(a, b, d, ks_cpu, layout, c=None, use_psum_layout=psum)
            assert "k_grouped_bf16_gemm_tn_contiguous" in str(info.value)
            np.testing.assert_array_equal(bits(d), before)
        with pytest.raises(ValueError, match=r"\(1, 1, gran_k\)"):
            deep_gemm.k_grouped_fp8_gemm_tn_contiguous((a, a), (b, b), d, [64, 32], np.array([64, 32], np.int32),
                                                       recipe=(1, 128, 128))
