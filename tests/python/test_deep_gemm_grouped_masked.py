"""deep_gemm M-grouped GEMMs, masked layout (DeepGEMM's API, docs/gemm.md): m_grouped_{bf16,fp8_fp4}_gemm_nt_masked
against float64 references for every FP8/FP4 recipe and both scale-factor styles, rows at or beyond
masked_m untouched (poisoned before the call), empty and full groups, DeepGEMM's 20-rows-per-group
decode case, bitwise determinism across thread counts, aliases and legacy names."""
import numpy as np
import pytest

from grouped_helpers import (
    BF16, POISON, QUANTS, SF_STYLES, assert_same_bits_across_threads, bits, check_diff, f64, pack_sf, poisoned,
    quantise_groups,
)
from tessera import deep_gemm

MASKED_M = [5, 0, 24, 20]
MAX_M = 24


def masked_problem(rng, quant, sf_style, masked_m, max_m, n, k):
    g = len(masked_m)
    ue8m0 = sf_style == "ue8m0"
    x = rng.standard_normal((g, max_m, k)).astype(np.float32)
    y = rng.standard_normal((g, n, k)).astype(np.float32)
    qa, sfa, deq_a = quantise_groups(x, quant.a_fp4, quant.gran_k_a, False, ue8m0)
    qb, sfb, deq_b = quantise_groups(y, quant.b_fp4, quant.gran_k_b, quant.b_block, ue8m0)
    ref = np.einsum("gmk,gnk->gmn", f64(x), f64(y))
    deq_ref = np.einsum("gmk,gnk->gmn", deq_a, deq_b)
    if ue8m0:
        sfa = pack_sf(sfa, 1, max_m)
        sfb = pack_sf(sfb, 128 if quant.b_block else 1, n)
    else:
        for group, rows in enumerate(masked_m):
            sfa[group, rows:] = np.nan  # rows beyond masked_m must not leak into anything written
    return (qa, sfa), (qb, sfb), ref, deq_ref


def check_masked(d, masked_m, ref, deq_ref, threshold, what, deq_threshold=1e-5):
    valid = np.arange(d.shape[1])[None, :] < np.array(masked_m)[:, None]
    check_diff(d[valid], ref[valid], deq_ref[valid], threshold, what, deq_threshold)
    assert np.all(f64(d[~valid]) == POISON), f"{what}: rows at or beyond masked_m must be untouched"


@pytest.mark.parametrize("sf_style", SF_STYLES)
@pytest.mark.parametrize("quant", QUANTS, ids=repr)
def test_m_grouped_fp8_fp4_masked(rng, quant, sf_style):
    n, k = 48, 224
    a, b, ref, deq_ref = masked_problem(rng, quant, sf_style, MASKED_M, MAX_M, n, k)
    d = poisoned(ref.shape)
    masked_m = np.array(MASKED_M, np.int32)
    assert deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked(a, b, d, masked_m, 16, **quant.recipe_kwargs) is None
    check_masked(d, MASKED_M, ref, deq_ref, quant.threshold, f"masked {quant} {sf_style}")


def test_m_grouped_bf16_masked(rng):
    n, k = 40, 200
    a = rng.standard_normal((len(MASKED_M), MAX_M, k)).astype(BF16)
    b = rng.standard_normal((len(MASKED_M), n, k)).astype(BF16)
    ref = np.einsum("gmk,gnk->gmn", f64(a), f64(b))
    d = poisoned(ref.shape)
    assert deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, np.array(MASKED_M, np.int32), expected_m=20) is None
    check_masked(d, MASKED_M, ref, ref, 1e-5, "bf16 masked")


def test_masked_20_rows_per_group_decode_case(rng):
    """DeepGEMM's many-small-groups shape (expected_m 20), scaled down: 8 groups of max_m 64."""
    masked_m = [20, 14, 26, 20, 0, 17, 23, 20]
    quant = QUANTS[0]
    a, b, ref, deq_ref = masked_problem(rng, quant, "fp32", masked_m, 64, 64, 256)
    d = poisoned(ref.shape)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, np.array(masked_m, np.int32), 20)
    check_masked(d, masked_m, ref, deq_ref, 1e-3, "masked expected_m=20")


@pytest.mark.parametrize("family", ["bf16", "fp8xfp8"])
def test_masked_is_bitwise_deterministic_across_threads(rng, family):
    masked_m = np.array([64, 3, 0, 41], np.int32)
    n, k = 96, 384
    if family == "bf16":
        a = rng.standard_normal((4, 64, k)).astype(BF16)
        b = rng.standard_normal((4, n, k)).astype(BF16)
        fn = deep_gemm.m_grouped_bf16_gemm_nt_masked
    else:
        a, b, _, _ = masked_problem(rng, QUANTS[0], "ue8m0", list(masked_m), 64, n, k)
        fn = deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked
    d = poisoned((4, 64, n))

    def call():
        d[...] = POISON
        fn(a, b, d, masked_m, 32)
        return d

    assert_same_bits_across_threads(call)


def test_aliases_and_legacy_names(rng):
    assert deep_gemm.m_grouped_fp8_gemm_nt_masked is deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked
    assert deep_gemm.fp8_m_grouped_gemm_nt_masked is deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked
    assert deep_gemm.bf16_m_grouped_gemm_nt_masked is deep_gemm.m_grouped_bf16_gemm_nt_masked
    masked_m = [3, 24, 0]
    a, b, ref, deq_ref = masked_problem(rng, QUANTS[0], "fp32", masked_m, MAX_M, 32, 128)
    d = poisoned(ref.shape)
    assert deep_gemm.m_grouped_gemm_fp8_fp8_bf16_nt_masked(a, b, d, np.array(masked_m, np.int32), 8) is None
    check_masked(d, masked_m, ref, deq_ref, 1e-3, "m_grouped_gemm_fp8_fp8_bf16_nt_masked")


def test_masked_rejects_bad_counts_and_hints(rng):
    a = rng.standard_normal((2, 8, 64)).astype(BF16)
    b = rng.standard_normal((2, 16, 64)).astype(BF16)
    d = poisoned((2, 8, 16))
    before = bits(d).copy()
    for masked_m, expected_m, needle in [([9, 1], 4, "masked_m"), ([-1, 1], 4, "masked_m"), ([1, 1, 1], 4, "masked_m"),
                                         ([1, 1], 0, "expected_m")]:
        with pytest.raises(ValueError, match=needle) as info:
            deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, np.array(masked_m, np.int32), expected_m)
        assert "m_grouped_bf16_gemm_nt_masked" in str(info.value)
        np.testing.assert_array_equal(bits(d), before)
    with pytest.raises(TypeError, match="'expected_m' must be an int"):
        deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, np.array([1, 1], np.int32), 2.0)
