"""deep_gemm M-grouped GEMMs, contiguous layout (DeepGEMM's API, docs/gemm.md): m_grouped_{bf16,fp8_fp4}_gemm_{nt,nn}
_contiguous with per-row group ids (-1 padding rows written as zeros) and psum layouts (gaps, empty
groups, rows after the last end; zeros with ensure_zero_padding, untouched without), every FP8/FP4
recipe with float32 and packed UE8M0 scale factors, K tails, float64 references, bitwise
determinism across thread counts, aliases and the DeepGEMM v1 name."""
import numpy as np
import pytest

from grouped_helpers import (
    BF16, POISON, QUANTS, SF_STYLES, assert_same_bits_across_threads, bits, check_diff, contiguous_layout, f64,
    mk_alignment, nn_of, pack_sf, poisoned, quantise_groups, quantise_rows,
)
from tessera import deep_gemm

SIZES = [7, 0, 33, 16, 20]  # an empty group, one of exactly the alignment, partial blocks
ALIGN = 16
LAYOUTS = [("ids", True), ("psum", True), ("psum", False)]  # (layout, ensure_zero_padding)


def scaled_problem(rng, quant, sf_style, sizes, n, k, psum, alignment):
    grouped_layout, m_sum, row_group = contiguous_layout(sizes, alignment, psum)
    ue8m0 = sf_style == "ue8m0"
    x = rng.standard_normal((m_sum, k)).astype(np.float32)
    x[row_group < 0] = 0  # DeepGEMM: padding and gap rows of A are zero
    y = rng.standard_normal((len(sizes), n, k)).astype(np.float32)
    qa, sfa, deq_a = quantise_rows(x, quant.a_fp4, quant.gran_k_a, False, ue8m0)
    qb, sfb, deq_b = quantise_groups(y, quant.b_fp4, quant.gran_k_b, quant.b_block, ue8m0)
    ref, deq_ref = np.zeros((m_sum, n)), np.zeros((m_sum, n))
    for g in range(len(sizes)):
        rows = row_group == g
        ref[rows] = f64(x[rows]) @ f64(y[g]).T
        deq_ref[rows] = deq_a[rows] @ deq_b[g].T
    if ue8m0:
        sfa = pack_sf(sfa, 1, m_sum, grouped_layout if psum else None)
        sfb = pack_sf(sfb, 128 if quant.b_block else 1, n)
    else:
        sfa[row_group < 0] = np.nan  # scale factors of padding / gap rows may be garbage
    return (qa, sfa), (qb, sfb), grouped_layout, row_group, ref, deq_ref


def check_rows(d, row_group, ref, deq_ref, threshold, zero_padding, what, deq_threshold=1e-5):
    valid = row_group >= 0
    check_diff(d[valid], ref[valid], deq_ref[valid], threshold, what, deq_threshold)
    if zero_padding:
        assert np.all(bits(d[~valid]) == 0), f"{what}: padding / gap rows must be +0"
    else:
        assert np.all(f64(d[~valid]) == POISON), f"{what}: gap rows must be untouched"


@pytest.mark.parametrize("layout, ensure_zero_padding", LAYOUTS)
@pytest.mark.parametrize("letters", ["nt", "nn"])
@pytest.mark.parametrize("sf_style", SF_STYLES)
@pytest.mark.parametrize("quant", QUANTS, ids=repr)
def test_m_grouped_fp8_fp4_contiguous(rng, quant, sf_style, letters, layout, ensure_zero_padding):
    n, k = 40, 224  # K tails for gran_k 128 (224 = 128 + 96); N not a multiple of anything
    psum = layout == "psum"
    with mk_alignment(ALIGN):
        a, b, grouped_layout, row_group, ref, deq_ref = scaled_problem(rng, quant, sf_style, SIZES, n, k, psum, ALIGN)
        if letters == "nn":
            b = nn_of(*b, quant.b_fp4)
        d = poisoned(ref.shape)
        fn = getattr(deep_gemm, f"m_grouped_fp8_fp4_gemm_{letters}_contiguous")
        call = lambda: fn(a, b, d, grouped_layout, use_psum_layout=psum,  # noqa: E731
                          ensure_zero_padding=ensure_zero_padding, **quant.recipe_kwargs)
        assert call() is None  # 'nn' with FP4 B: packed along N
    check_rows(d, row_group, ref, deq_ref, quant.threshold, ensure_zero_padding,
               f"{fn.__name__} {quant} {sf_style} {layout} zero_padding={ensure_zero_padding}")


@pytest.mark.parametrize("layout, ensure_zero_padding", LAYOUTS)
@pytest.mark.parametrize("letters", ["nt", "nn"])
def test_m_grouped_bf16_contiguous(rng, letters, layout, ensure_zero_padding):
    n, k = 56, 136
    psum = layout == "psum"
    grouped_layout, m_sum, row_group = contiguous_layout(SIZES, ALIGN, psum)
    a = rng.standard_normal((m_sum, k)).astype(BF16)
    b = rng.standard_normal((len(SIZES), n, k)).astype(BF16)
    ref = np.zeros((m_sum, n))
    for g in range(len(SIZES)):
        ref[row_group == g] = f64(a[row_group == g]) @ f64(b[g]).T
    b_given = np.ascontiguousarray(b.transpose(0, 2, 1)) if letters == "nn" else b
    d = poisoned((m_sum, n))
    with mk_alignment(ALIGN):
        getattr(deep_gemm, f"m_grouped_bf16_gemm_{letters}_contiguous")(
            a, b_given, d, grouped_layout, use_psum_layout=psum, ensure_zero_padding=ensure_zero_padding)
    check_rows(d, row_group, ref, ref, 1e-5, ensure_zero_padding, f"bf16 {letters} {layout}")


def test_default_alignment_of_128_and_the_expected_m_hint(rng):
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 128
    sizes, n, k = [130, 5], 24, 128
    grouped_layout, m_sum, row_group = contiguous_layout(sizes, 128, True)
    assert m_sum == 384
    a = rng.standard_normal((m_sum, k)).astype(BF16)
    a[row_group < 0] = 0
    b = rng.standard_normal((2, n, k)).astype(BF16)
    ref = np.zeros((m_sum, n))
    for g in range(2):
        ref[row_group == g] = f64(a[row_group == g]) @ f64(b[g]).T
    d = poisoned((m_sum, n))
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, grouped_layout, use_psum_layout=True,
                                                expected_m_for_psum_layout=70)
    check_rows(d, row_group, ref, ref, 1e-5, True, "bf16 psum alignment 128")
    with pytest.raises(ValueError, match="only meaningful with use_psum_layout=True"):
        deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, row_group, expected_m_for_psum_layout=70)


@pytest.mark.parametrize("family", ["bf16", "fp8xfp4"])
@pytest.mark.parametrize("psum", [False, True])
def test_m_grouped_contiguous_is_bitwise_deterministic_across_threads(rng, family, psum):
    sizes, n, k = [100, 37, 0, 64], 96, 512
    with mk_alignment(32):
        if family == "bf16":
            grouped_layout, m_sum, _ = contiguous_layout(sizes, 32, psum)
            a = rng.standard_normal((m_sum, k)).astype(BF16)
            b = rng.standard_normal((len(sizes), n, k)).astype(BF16)
            fn, kwargs = deep_gemm.m_grouped_bf16_gemm_nt_contiguous, {}
        else:
            quant = next(q for q in QUANTS if q.name == family)
            a, b, grouped_layout, _, _, _ = scaled_problem(rng, quant, "ue8m0", sizes, n, k, psum, 32)
            m_sum = len(a[0])
            fn, kwargs = deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous, quant.recipe_kwargs
        d = poisoned((m_sum, n))

        def call():
            d[...] = POISON
            fn(a, b, d, grouped_layout, use_psum_layout=psum, **kwargs)
            return d

        assert_same_bits_across_threads(call)


def test_aliases_and_the_v1_name(rng):
    assert deep_gemm.m_grouped_fp8_gemm_nt_contiguous is deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous
    assert deep_gemm.m_grouped_fp8_gemm_nn_contiguous is deep_gemm.m_grouped_fp8_fp4_gemm_nn_contiguous
    quant = QUANTS[0]  # (1, 128) x (128, 128) float32 scales: DeepGEMM v1's recipe
    with mk_alignment(ALIGN):
        a, b, m_indices, row_group, ref, deq_ref = scaled_problem(rng, quant, "fp32", SIZES, 48, 256, False, ALIGN)
        d = poisoned(ref.shape)
        assert deep_gemm.m_grouped_gemm_fp8_fp8_bf16_nt_contiguous(a, b, d, m_indices) is None
    check_rows(d, row_group, ref, deq_ref, 1e-3, True, "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous")
