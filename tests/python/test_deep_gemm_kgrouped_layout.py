"""deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor (DeepGEMM's API, docs/gemm.md): bit-exact
packing per group (never across a group boundary), shape and strides, psum layouts with gaps and
empty groups, and the argument checks."""
import numpy as np
import pytest

from tessera import deep_gemm

FN = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor


def random_pow2(rng, rows, mn):
    return (2.0 ** rng.integers(-40, 40, size=(rows, mn))).astype(np.float32)


def reference_pack(sf, sizes, gran_k):
    """Plain loops: each group's SF rows, four per int32 (byte j = row 4i+j), zeros after its last row."""
    out, first = [], 0
    for k in sizes:
        rows = -(-k // gran_k)
        for i in range(-(-rows // 4)):
            word = np.zeros(sf.shape[1], np.uint32)
            for j in range(4):
                if 4 * i + j < rows:
                    word |= (sf[first + 4 * i + j].view(np.uint32) >> 23) << (8 * j)
            out.append(word.view(np.int32))
        first += rows
    return np.array(out, np.int32).reshape(-1, sf.shape[1])


@pytest.mark.parametrize("gran_k", [32, 128])
@pytest.mark.parametrize("ks", [[256, 384, 128], [0, 512, 0, 128], [1024]])
def test_packs_every_group_on_its_own(rng, gran_k, ks):
    mn = 12
    rows = sum(-(-k // gran_k) for k in ks)
    sf = random_pow2(rng, rows, mn)
    out = FN(sf, np.array(ks, np.int32), ks, gran_k, 128)
    expected = reference_pack(sf, ks, gran_k)
    assert out.dtype == np.int32 and out.shape == expected.shape and out.flags.c_contiguous
    np.testing.assert_array_equal(out, expected)


def test_psum_layout_with_gaps_and_empty_groups(rng):
    gran_k, alignment = 32, 128
    ends = [100, 128, 300, 300, 512]  # groups: [0,100) [128,128) [128,300) empty (repeats 300) [384,512)
    sizes = [100, 0, 172, 0, 128]
    rows = sum(-(-k // gran_k) for k in sizes)
    sf = random_pow2(rng, rows, 8)
    out = FN(sf, np.array(ends, np.int32), None, gran_k, alignment, use_psum_layout=True)
    np.testing.assert_array_equal(out, reference_pack(sf, sizes, gran_k))


def test_rejects_bad_arguments(rng):
    sf = random_pow2(rng, 6, 4)
    ks = [128, 64]
    layout = np.array(ks, np.int32)
    with pytest.raises(ValueError, match="multiples of the K alignment 128"):
        FN(sf, layout, ks, 32, 128)
    with pytest.raises(ValueError, match="'ks_cpu' is required"):
        FN(sf, np.array([128, 64], np.int32), None, 32, 64)
    with pytest.raises(ValueError, match="same K sizes"):
        FN(sf, layout, [128, 128], 32, 64)
    with pytest.raises(ValueError, match="one entry per group"):
        FN(sf, layout, [128], 32, 64)
    with pytest.raises(ValueError, match="must have sum_g ceil"):
        FN(sf[:5], layout, ks, 32, 64)
    with pytest.raises(ValueError, match="powers of two"):
        FN(sf * np.float32(1.5), layout, ks, 32, 64)
    with pytest.raises(ValueError, match="non-decreasing"):
        FN(sf, np.array([128, 64], np.int32), None, 32, 64, use_psum_layout=True)
    with pytest.raises(ValueError, match="inside the alignment gap"):
        FN(sf, np.array([100, 120], np.int32), None, 32, 64, use_psum_layout=True)
    with pytest.raises(ValueError, match="contiguous 1-D int32"):
        FN(sf, layout.astype(np.int64), ks, 32, 64)
    assert FN(sf, layout, ks, 32, 64).shape == (2, 4)
