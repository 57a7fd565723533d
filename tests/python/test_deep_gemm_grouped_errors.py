"""Bad input to the M-grouped contiguous GEMMs: misaligned segments, group ids out of range, wrong
group counts, wrong scale-factor shapes, psum ends decreasing or past the rows, wrong output dtype.
Each raises InvalidArgumentError (a ValueError and a RuntimeError) whose message names the function
and the argument, and leaves d untouched. Also: the alignment knob reaches the C++ check."""
import numpy as np
import pytest

from grouped_helpers import BF16, bits, contiguous_layout, mk_alignment, poisoned, quantise_groups, quantise_rows
from tessera import deep_gemm

G, N, K, ALIGN = 3, 32, 256, 16
FN = "m_grouped_fp8_fp4_gemm_nt_contiguous"


def problem(rng, sizes=(5, 16, 9)):
    grouped_layout, m_sum, _ = contiguous_layout(list(sizes), ALIGN, False)
    x = rng.standard_normal((m_sum, K)).astype(np.float32)
    y = rng.standard_normal((G, N, K)).astype(np.float32)
    qa, sfa, _ = quantise_rows(x, False, 128, False, False)
    qb, sfb, _ = quantise_groups(y, False, 128, True, False)
    return (qa, sfa), (qb, sfb), grouped_layout, m_sum


def expect_rejected(call, d, needle, fn=FN):
    before = bits(d).copy()
    with pytest.raises(ValueError, match=needle) as info:
        call()
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert fn in message, message
    np.testing.assert_array_equal(bits(d), before)
    print(message)


def test_segments_must_start_at_the_alignment(rng):
    a, b, _, m_sum = problem(rng)
    layout = np.full(m_sum, -1, np.int32)
    layout[0:5], layout[5:21], layout[21:30] = 0, 1, 2  # group 1 starts at row 5, not a multiple of 16
    d = poisoned((m_sum, N))
    with mk_alignment(ALIGN):
        expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, layout), d, "grouped_layout")
    with mk_alignment(1):  # the knob reaches C++: with alignment 1 the same layout is valid
        deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, layout)
    assert np.all(np.isfinite(d.astype(np.float32)))


@pytest.mark.parametrize("bad_id", [3, -2])
def test_group_ids_out_of_range(rng, bad_id):
    a, b, layout, m_sum = problem(rng)
    layout = layout.copy()
    layout[layout == 2] = bad_id
    d = poisoned((m_sum, N))
    with mk_alignment(ALIGN):
        expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, layout), d, "grouped_layout")


def test_wrong_group_counts_and_layout_lengths(rng):
    a, b, layout, m_sum = problem(rng)
    d = poisoned((m_sum, N))
    with mk_alignment(ALIGN):
        psum, _, _ = contiguous_layout([5, 16, 9], ALIGN, True)
        for bad in (np.append(psum, psum[-1]), psum[:-1]):  # G + 1 and G - 1 ends for G groups of b
            expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, bad, use_psum_layout=True),
                            d, "grouped_layout")
        expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, layout[:-1]), d,
                        "grouped_layout")
        expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, layout.astype(np.int64)), d,
                        "grouped_layout")


def test_psum_ends_decreasing_or_past_the_rows(rng):
    a, b, _, m_sum = problem(rng)
    d = poisoned((m_sum, N))
    with mk_alignment(ALIGN):
        for ends in ([5, 3, 40], [5, 21, m_sum + 1]):
            layout = np.array(ends, np.int32)
            expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, layout,
                                                                                   use_psum_layout=True),
                            d, "grouped_layout")


def test_wrong_scale_factor_shapes(rng):
    (qa, sfa), (qb, sfb), layout, m_sum = problem(rng)
    d = poisoned((m_sum, N))
    with mk_alignment(ALIGN):
        for a, b in [((qa, sfa[:-1]), (qb, sfb)),              # SFA missing a row
                     ((qa, sfa[:, :1]), (qb, sfb)),            # SFA missing a K block
                     ((qa, sfa), (qb, sfb[:-1])),              # SFB with G - 1 groups
                     ((qa, sfa), (qb, sfb[:, :, :1]))]:        # SFB missing a K block
            expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d, layout), d, "scale")


def test_wrong_output_and_operand_types(rng):
    a, b, layout, m_sum = problem(rng)
    with mk_alignment(ALIGN):
        d32 = np.zeros((m_sum, N), np.float32)  # grouped outputs must be bfloat16
        expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, d32, layout), d32, "'d'")
        d = poisoned((m_sum, N))
        expect_rejected(lambda: deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, (b[0][:2], b[1][:2]), d, layout,
                                                                               recipe=(1, 128, 128)), d, "grouped_layout")
        bf16_b = np.zeros((G, N, K), BF16)
        expect_rejected(lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a[0], bf16_b, d, layout), d, "'a'",
                        fn="m_grouped_bf16_gemm_nt_contiguous")
    with pytest.raises(TypeError, match="'use_psum_layout' must be a bool"):
        deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a[0], bf16_b, d, layout, use_psum_layout=1)
    with pytest.raises(TypeError, match="'compiled_dims' must be a str"):
        deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a[0], bf16_b, d, layout, compiled_dims=None)
