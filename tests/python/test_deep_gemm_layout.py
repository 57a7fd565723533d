"""Scale-factor layout utilities: exact shapes, strides and values (DeepGEMM's API, docs/gemm.md)."""
import numpy as np
import pytest

from helpers import bits
from tessera import deep_gemm


def estrides(x):
    return tuple(s // x.itemsize for s in x.strides)


def powers_of_two(rng, shape):
    return (2.0 ** rng.integers(-20, 20, size=shape)).astype(np.float32)


def test_get_tma_aligned_size():
    assert [deep_gemm.get_tma_aligned_size(x, 4) for x in (0, 1, 4, 5, 129)] == [0, 4, 4, 8, 132]
    assert deep_gemm.get_tma_aligned_size(3, 1) == 16 and deep_gemm.get_tma_aligned_size(9, 2) == 16
    with pytest.raises(ValueError, match="element_size"):
        deep_gemm.get_tma_aligned_size(8, 3)


@pytest.mark.parametrize("mn", [1, 3, 4, 5, 128, 129])
@pytest.mark.parametrize("sf_k", [1, 4, 17])
def test_mn_major_tma_aligned_tensor_2d(rng, mn, sf_k):
    sf = rng.standard_normal((mn, sf_k), dtype=np.float32)
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    amn = (mn + 3) // 4 * 4
    assert out.shape == (mn, sf_k) and out.dtype == np.float32
    assert estrides(out) == (1, amn)
    np.testing.assert_array_equal(bits(out), bits(sf))
    assert deep_gemm.get_mn_major_tma_aligned_tensor(out) is out  # already in the layout: returned as-is
    assert deep_gemm.get_col_major_tma_aligned_tensor is deep_gemm.get_mn_major_tma_aligned_tensor


@pytest.mark.parametrize("groups, mn, sf_k", [(1, 5, 3), (3, 6, 5), (2, 128, 1)])
def test_mn_major_tma_aligned_tensor_3d(rng, groups, mn, sf_k):
    sf = rng.standard_normal((groups, sf_k, mn), dtype=np.float32).transpose(0, 2, 1)  # strided input
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    amn = (mn + 3) // 4 * 4
    assert out.shape == (groups, mn, sf_k)
    assert estrides(out) == (amn * sf_k, 1, amn)
    np.testing.assert_array_equal(out, sf)


@pytest.mark.parametrize("mn", [1, 5, 128, 130])
@pytest.mark.parametrize("sf_k", [1, 4, 7, 17])
def test_packed_ue8m0_tensor_2d(rng, mn, sf_k):
    sf = powers_of_two(rng, (mn, sf_k))
    out = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    packed_k, amn = (sf_k + 3) // 4, (mn + 3) // 4 * 4
    assert out.shape == (mn, packed_k) and out.dtype == np.int32
    assert estrides(out) == (1, amn)
    exponents = (sf.view(np.int32) >> 23).astype(np.uint8)
    expected = np.zeros((mn, packed_k * 4), np.uint8)  # missing K entries: byte 0
    expected[:, :sf_k] = exponents
    np.testing.assert_array_equal(np.ascontiguousarray(out).view(np.uint8), expected)
    np.testing.assert_array_equal(deep_gemm.unpack_ue8m0_from_int(np.ascontiguousarray(out))[:, :sf_k], sf)


def test_packed_ue8m0_tensor_3d(rng):
    groups, mn, sf_k = 3, 6, 9
    sf = powers_of_two(rng, (groups, mn, sf_k))
    out = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    assert out.shape == (groups, mn, 3) and estrides(out) == (8 * 3, 1, 8)
    for g in range(groups):
        expected = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf[g])
        np.testing.assert_array_equal(out[g], expected)


def test_packed_ue8m0_with_psum_layout_zeroes_gap_rows(rng):
    deep_gemm.set_mk_alignment_for_contiguous_layout(8)
    try:
        ends = np.array([5, 13, 20], np.int32)  # groups [0,5), [8,13), [16,20); gaps 5..7, 13..15, 20..23
        sf = powers_of_two(rng, (24, 6))
        gap = np.zeros(24, bool)
        gap[[5, 6, 7, 13, 14, 15, 20, 21, 22, 23]] = True
        sf[gap] = np.float32(0.3)  # garbage in gap rows must not be read
        out = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout=ends)
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(128)
    assert out.shape == (24, 2) and estrides(out) == (1, 24)
    assert not np.ascontiguousarray(out)[gap].any()
    clean = sf.copy()
    clean[gap] = 1.0
    np.testing.assert_array_equal(out[~gap], deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(clean)[~gap])


def test_packed_ue8m0_with_bad_psum_layout(rng):
    sf = powers_of_two(rng, (8, 4))
    with pytest.raises(ValueError, match="'psum_layout' must be non-decreasing and <= MN = 8"):
        deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout=np.array([4, 2], np.int32))
    with pytest.raises(ValueError, match="'psum_layout' must be a contiguous 1-D int32 array"):
        deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout=np.array([4], np.int64))


def test_transform_sf_broadcasts_block_scales_and_packs(rng):
    n, k = 300, 576
    sf = powers_of_two(rng, (3, 5))  # [ceil(300/128), ceil(576/128)]
    out = deep_gemm.transform_sf_into_required_layout(sf, n, k, (1, 128, 128), is_sfa=False)
    assert out.shape == (n, 2) and out.dtype == np.int32 and estrides(out) == (1, 300)
    expected = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf[np.arange(n) // 128])
    np.testing.assert_array_equal(out, expected)
    same = deep_gemm.transform_sf_into_required_layout(sf, n, k, (128, 128))  # 2-entry recipe, no is_sfa
    np.testing.assert_array_equal(same, out)


def test_transform_sf_with_disabled_ue8m0_cast_keeps_float32(rng):
    m, k = 10, 576
    per_token = rng.random((m, 5), dtype=np.float32)
    out = deep_gemm.transform_sf_into_required_layout(per_token, m, k, (1, 128, 128), is_sfa=True,
                                                      disable_ue8m0_cast=True)
    assert out.dtype == np.float32 and estrides(out) == (1, 12)
    np.testing.assert_array_equal(out, per_token)
    block = rng.random((2, 5), dtype=np.float32)
    assert deep_gemm.transform_sf_into_required_layout(block, 200, k, (1, 128, 128), is_sfa=False,
                                                       disable_ue8m0_cast=True) is block
    with pytest.raises(ValueError, match="128x128 blocks\\) must be contiguous"):
        deep_gemm.transform_sf_into_required_layout(np.zeros((2, 10), np.float32)[:, ::2], 200, k, (128, 128),
                                                    disable_ue8m0_cast=True)


def test_transform_sf_validates_packed_int32(rng):
    m, k = 10, 576
    packed = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(powers_of_two(rng, (m, 5)))
    assert deep_gemm.transform_sf_into_required_layout(packed, m, k, (1, 128)) is packed
    with pytest.raises(ValueError, match="must be MN-major and TMA-aligned"):
        deep_gemm.transform_sf_into_required_layout(np.ascontiguousarray(packed), m, k, (1, 128))


def test_transform_sf_checks_shapes_and_recipes(rng):
    sf = rng.random((10, 5), dtype=np.float32)
    with pytest.raises(ValueError, match=r"argument 'sf' must have shape \[10, 3\]"):
        deep_gemm.transform_sf_into_required_layout(sf, 10, 300, (1, 128, 128), is_sfa=True)
    with pytest.raises(RuntimeError, match="needs 'is_sfa'"):
        deep_gemm.transform_sf_into_required_layout(sf, 10, 576, (1, 128, 128))
    with pytest.raises(RuntimeError, match="must not come with 'is_sfa'"):
        deep_gemm.transform_sf_into_required_layout(sf, 10, 576, (1, 128), is_sfa=True)
    with pytest.raises(ValueError, match=r"must have shape \[2, 10, 5\]"):
        deep_gemm.transform_sf_into_required_layout(sf, 10, 576, (1, 128), num_groups=2)
    with pytest.raises(ValueError, match="no layout for float32 scale factors with gran_mn 1, gran_k 64"):
        deep_gemm.transform_sf_into_required_layout(rng.random((10, 9), dtype=np.float32), 10, 576, (1, 64))
