"""deep_gemm.tf32_hc_prenorm_gemm (DeepGEMM's API, docs/gemm.md: each split's partial sums and their total against
float64) and fp8_gemm_nt_skip_head_mid (section 1.2: column mapping, skipped columns untouched, both
scale-factor styles), with determinism and bad input; DeepGEMM's argument names and defaults."""
import inspect

import numpy as np
import pytest

from grouped_helpers import BF16, POISON, assert_same_bits_across_threads, bits, check_diff, f64, pack_sf, poisoned
from tessera import deep_gemm
from tessera.deep_gemm.testing import calc_diff


def split_blocks(k, splits):
    """[start, end) K ranges of each split: 64-wide blocks, split s gets nb/S (+1 for s < nb % S)."""
    nb = k // 64
    counts = [nb // splits + (1 if s < nb % splits else 0) for s in range(splits)]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) * 64
    return [(int(s0), int(s0 + c * 64)) for s0, c in zip(starts, counts)]


@pytest.mark.parametrize("m", [1, 13, 70])
@pytest.mark.parametrize("num_splits", [None, 1, 3, 16])
def test_tf32_hc_prenorm_gemm(rng, m, num_splits):
    n, k = 24, 448  # 7 blocks of 64: 16 splits leave some empty
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((n, k)).astype(np.float32)
    shape_d, shape_s = ((m, n), (m,)) if num_splits is None else ((num_splits, m, n), (num_splits, m))
    d = np.full(shape_d, POISON, np.float32)
    s = np.full(shape_s, POISON, np.float32)
    assert deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits) is None
    a64, b64 = f64(a), f64(b)
    ref_d, ref_s = a64 @ b64.T, (a64 * a64).sum(-1)
    if num_splits is not None:
        for split, (k0, k1) in enumerate(split_blocks(k, num_splits)):
            part_d = a64[:, k0:k1] @ b64[:, k0:k1].T
            part_s = (a64[:, k0:k1] ** 2).sum(-1)
            assert np.allclose(d[split], part_d, rtol=1e-5, atol=1e-4), f"split {split} ({k0}, {k1}) of d"
            assert np.allclose(s[split], part_s, rtol=1e-5, atol=1e-4), f"split {split} ({k0}, {k1}) of sqr_sum"
        d, s = d.sum(0, dtype=np.float64), s.sum(0, dtype=np.float64)
    diff = max(calc_diff(d, ref_d), calc_diff(s, ref_s))
    print(f"tf32_hc_prenorm_gemm m={m} splits={num_splits}: diff={diff:.2e} (< 1e-8)")
    assert diff < 1e-8


def test_tf32_hc_prenorm_gemm_determinism_and_bad_input(rng):
    a = rng.standard_normal((96, 512)).astype(BF16)
    b = rng.standard_normal((32, 512)).astype(np.float32)
    d = np.empty((4, 96, 32), np.float32)
    s = np.empty((4, 96), np.float32)

    def call():
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=4)
        return np.concatenate([d.reshape(-1), s.reshape(-1)])

    assert_same_bits_across_threads(call)
    fn = "tf32_hc_prenorm_gemm"
    d2 = np.full((96, 32), POISON, np.float32)
    s2 = np.full(96, POISON, np.float32)
    before = bits(d2).copy()
    for bad_a, bad_b, needle in [(a[:, :500], b[:, :500], "K"), (a, b[:30], "N"),
                                 (a, rng.standard_normal((136, 512)).astype(np.float32), "N")]:
        with pytest.raises(ValueError, match=needle) as info:
            deep_gemm.tf32_hc_prenorm_gemm(bad_a, bad_b, np.full((96, len(bad_b)), 0, np.float32), s2)
        assert fn in str(info.value)
    with pytest.raises(ValueError, match="num_splits"):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d2, s2, num_splits=0)
    with pytest.raises(ValueError, match=fn):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d2, s2, num_splits=2)  # 2-D d with splits
    np.testing.assert_array_equal(bits(d2), before)


@pytest.mark.parametrize("sf_style", ["fp32", "ue8m0"])
@pytest.mark.parametrize("head_splits", [(32, 16, 32), (128, 64, 128)])
def test_fp8_gemm_nt_skip_head_mid(rng, sf_style, head_splits):
    left, mid, right = head_splits
    m, heads, k = 20, 3, 320
    n = heads * (left + right)
    ue8m0 = sf_style == "ue8m0"
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = rng.standard_normal((n, k)).astype(np.float32)
    qa, sfa = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=ue8m0)
    qb, sfb = deep_gemm.per_block_cast_to_fp8(y, use_ue8m0=ue8m0)
    cols = np.arange(k) // 128
    deq = (f64(qa) * f64(sfa)[:, cols]) @ (f64(qb) * f64(sfb)[np.arange(n) // 128][:, cols]).T
    if ue8m0:
        sfa, sfb = pack_sf(sfa, 1, m), pack_sf(sfb, 128, n)
    d = poisoned((m, n + heads * mid))
    assert deep_gemm.fp8_gemm_nt_skip_head_mid((qa, sfa), (qb, sfb), d, head_splits) is None
    logical = np.arange(n)
    target = logical + (logical + right) // (left + right) * mid
    skipped = np.setdiff1d(np.arange(d.shape[1]), target)
    assert len(skipped) == heads * mid
    check_diff(d[:, target], f64(x) @ f64(y).T, deq, 1e-3, f"skip_head_mid {head_splits} {sf_style}")
    assert np.all(f64(d[:, skipped]) == POISON), "skipped columns must be untouched"


def test_fp8_gemm_nt_skip_head_mid_rejects_bad_shapes(rng):
    x = rng.standard_normal((4, 128)).astype(np.float32)
    y = rng.standard_normal((96, 128)).astype(np.float32)
    a = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=False)
    b = deep_gemm.per_block_cast_to_fp8(y, use_ue8m0=False)
    for splits, width in [((32, 8, 32), 96 + 8), ((16, 8, 16), 96 + 20), ((16, 8, 16), 96 + 24 + 1)]:
        d = poisoned((4, width))
        before = bits(d).copy()
        with pytest.raises(ValueError, match="fp8_gemm_nt_skip_head_mid") as info:
            deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, splits)
        print(info.value)
        assert "'d'" in str(info.value) or "L + R" in str(info.value)
        np.testing.assert_array_equal(bits(d), before)
    with pytest.raises(ValueError, match="'head_splits' must have 3 entries"):
        deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, poisoned((4, 120)), (16, 8))


# DeepGEMM's argument names and defaults (csrc/apis/*.hpp and deep_gemm/utils of v2.6-v2.8).
SIGNATURES = {
    "m_grouped_fp8_fp4_gemm_nt_contiguous": "(a, b, d, grouped_layout, recipe=None, recipe_a=None, recipe_b=None, "
                                            "compiled_dims='nk', disable_ue8m0_cast=False, use_psum_layout=False, "
                                            "ensure_zero_padding=True, expected_m_for_psum_layout=None)",
    "m_grouped_fp8_fp4_gemm_nn_contiguous": "(a, b, d, grouped_layout, recipe=None, recipe_a=None, recipe_b=None, "
                                            "compiled_dims='nk', disable_ue8m0_cast=False, use_psum_layout=False, "
                                            "ensure_zero_padding=True)",
    "m_grouped_bf16_gemm_nt_contiguous": "(a, b, d, grouped_layout, compiled_dims='nk', use_psum_layout=False, "
                                         "ensure_zero_padding=True, expected_m_for_psum_layout=None)",
    "m_grouped_bf16_gemm_nn_contiguous": "(a, b, d, grouped_layout, compiled_dims='nk', use_psum_layout=False, "
                                         "ensure_zero_padding=True)",
    "m_grouped_fp8_fp4_gemm_nt_masked": "(a, b, d, masked_m, expected_m, recipe=None, recipe_a=None, recipe_b=None, "
                                        "compiled_dims='nk', disable_ue8m0_cast=False)",
    "m_grouped_bf16_gemm_nt_masked": "(a, b, d, masked_m, expected_m, compiled_dims='nk')",
    "k_grouped_fp8_gemm_tn_contiguous": "(a, b, d, ks_cpu, grouped_layout, c=None, recipe=(1, 1, 128), "
                                        "compiled_dims='mn', use_psum_layout=False)",
    "k_grouped_fp8_gemm_nt_contiguous": "(a, b, d, ks_cpu, grouped_layout, c=None, recipe=(1, 1, 128), "
                                        "compiled_dims='mn', use_psum_layout=False)",
    "k_grouped_bf16_gemm_tn_contiguous": "(a, b, d, ks_cpu, grouped_layout, c=None, compiled_dims='mn', "
                                         "use_psum_layout=False)",
    "fp8_gemm_nt_skip_head_mid": "(a, b, d, head_splits, recipe=None, compiled_dims='nk', disable_ue8m0_cast=False)",
    "einsum": "(expr, a, b, d, c=None, use_cublaslt=False)",
    "fp8_einsum": "(expr, a, b, d, c=None, recipe=(1, 128, 128))",
    "tf32_hc_prenorm_gemm": "(a, b, d, sqr_sum, num_splits=None)",
    "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous": "(lhs, rhs, out, m_indices)",
    "m_grouped_gemm_fp8_fp8_bf16_nt_masked": "(lhs, rhs, out, masked_m, expected_m)",
    "per_token_cast_to_fp4": "(x, use_ue8m0: bool, gran_k: int = 128, use_packed_ue8m0: bool = False)",
    "transpose_packed_fp4": "(a)",
    "cast_back_from_fp4": "(packed, sf, gran_k: int = 128, use_packed_ue8m0: bool = False)",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor": "(sf, grouped_layout, ks_cpu, gran_k: int, "
                                                              "k_alignment: int, use_psum_layout: bool = False)",
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signatures_match_deepgemm(name):
    signature = inspect.signature(getattr(deep_gemm, name))
    without_return = signature.replace(return_annotation=inspect.Signature.empty)
    assert str(without_return) == SIGNATURES[name]
