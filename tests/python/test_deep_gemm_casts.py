"""deep_gemm math utilities and FP8 quantisers (DeepGEMM's API, docs/gemm.md): shapes, scale values,
bit-exact codes (checked with ml_dtypes' encoder, independent of tessera's), dequantisation error."""
import ml_dtypes
import numpy as np
import pytest

from helpers import BF16, E4M3, f64
from tessera import deep_gemm
from tessera.deep_gemm.testing import calc_diff


def test_ceil_div_and_align():
    assert [deep_gemm.ceil_div(x, 128) for x in (0, 1, 128, 129)] == [0, 1, 1, 2]
    assert [deep_gemm.align(x, 4) for x in (0, 1, 4, 5)] == [0, 4, 4, 8]


def test_ceil_to_ue8m0(rng):
    x = np.concatenate([rng.standard_normal(10000, dtype=np.float32) * 1e3, [1.0, 0.5, -4.0, 0.0, 1e-45, 3e38]])
    x = x.astype(np.float32)
    out = deep_gemm.ceil_to_ue8m0(x)
    assert out.dtype == np.float32 and out.shape == x.shape
    b = np.abs(x).view(np.uint32)
    expected = (np.clip((b >> 23) + ((b & 0x7FFFFF) != 0), 1, 254).astype(np.uint32) << 23).view(np.float32)
    np.testing.assert_array_equal(out, expected)
    finite = (np.abs(x) >= 2.0 ** -126) & (np.abs(x) <= 2.0 ** 127)
    assert np.all(out[finite] >= np.abs(x[finite])) and np.all(out[finite] < 2 * np.abs(x[finite]))


def test_pack_and_unpack_ue8m0(rng):
    sf = (2.0 ** rng.integers(-30, 30, size=(5, 12))).astype(np.float32)
    packed = deep_gemm.pack_ue8m0_to_int(sf)
    assert packed.dtype == np.int32 and packed.shape == (5, 3)
    assert packed.view(np.uint8)[2, 5] == (sf.view(np.int32)[2, 5] >> 23)  # byte j of int i = SF 4i+j
    np.testing.assert_array_equal(deep_gemm.unpack_ue8m0_from_int(packed), sf)
    with pytest.raises(ValueError, match="last dimension divisible by 4"):
        deep_gemm.pack_ue8m0_to_int(sf[:, :6])
    with pytest.raises(ValueError, match="powers of two"):
        deep_gemm.pack_ue8m0_to_int(sf * np.float32(1.5))


def block_amax(x, rows, cols):
    """max |x| over each rows x cols block (edge blocks partial), in plain loops."""
    m, n = x.shape
    out = np.zeros(((m + rows - 1) // rows, (n + cols - 1) // cols), np.float32)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = np.abs(x[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols]).max(initial=0)
    return out


def check_quantised(x, q, sf, rows, cols, use_ue8m0):
    """sf follows DeepGEMM's per-block scale rule (docs/gemm.md); q = e4m3(x * (1/sf)) bit for bit; q * sf is close
    to x."""
    amax = np.maximum(block_amax(x, rows, cols), np.float32(1e-4))
    r_idx, c_idx = np.arange(x.shape[0]) // rows, np.arange(x.shape[1]) // cols
    if use_ue8m0:
        assert not np.any(sf.view(np.int32) & 0x7FFFFF), "UE8M0 scales must be powers of two"
        assert np.all(sf >= amax / np.float32(448)) and np.all(sf < 2 * amax / np.float32(448))
    else:
        np.testing.assert_array_equal(sf, amax / np.float32(448))
    sf_full = sf[r_idx][:, c_idx]
    expected_q = (x * (np.float32(1) / sf_full)).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(q.view(np.uint8), expected_q.view(np.uint8))
    dequant = f64(q) * f64(sf_full)
    assert np.all(np.abs(dequant - x) <= 2.0 ** -4 * np.abs(x) + f64(sf_full) * 2.0 ** -10)
    return calc_diff(dequant, x)


@pytest.mark.parametrize("n, gran_k", [(576, 128), (2112, 128), (100, 128), (96, 32)])
@pytest.mark.parametrize("use_ue8m0", [False, True])
def test_per_token_cast(rng, n, gran_k, use_ue8m0):
    x = rng.standard_normal((9, n), dtype=np.float32) * np.float32(3)
    x[4] = 0  # an all-zero row: amax is clamped to 1e-4
    q, sf = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0, gran_k=gran_k)
    assert q.dtype == E4M3 and q.shape == (9, n) and q.flags.c_contiguous
    assert sf.dtype == np.float32 and sf.shape == (9, (n + gran_k - 1) // gran_k)
    diff = check_quantised(x, q, sf, 1, gran_k, use_ue8m0)
    print(f"per_token n={n} gran_k={gran_k} ue8m0={use_ue8m0}: dequantised diff={diff:.2e}")
    assert diff < 1e-3


def test_per_token_cast_packed_ue8m0(rng):
    x = rng.standard_normal((5, 1024), dtype=np.float32)
    q, packed = deep_gemm.per_token_cast_to_fp8(x, True, use_packed_ue8m0=True)
    _, sf = deep_gemm.per_token_cast_to_fp8(x, True)
    assert packed.dtype == np.int32 and packed.shape == (5, 2)
    np.testing.assert_array_equal(packed, deep_gemm.pack_ue8m0_to_int(sf))


def test_per_token_cast_accepts_bf16_input(rng):
    x = rng.standard_normal((3, 256), dtype=np.float32).astype(BF16)
    q, sf = deep_gemm.per_token_cast_to_fp8(x, False)
    check_quantised(x.astype(np.float32), q, sf, 1, 128, False)


@pytest.mark.parametrize("use_ue8m0", [False, True])
def test_per_channel_cast(rng, use_ue8m0):
    x = rng.standard_normal((256, 70), dtype=np.float32)
    q, sf = deep_gemm.per_channel_cast_to_fp8(x, use_ue8m0)
    assert q.shape == (256, 70) and sf.shape == (2, 70)
    check_quantised(x, q, sf, 128, 1, use_ue8m0)
    with pytest.raises(ValueError, match="row count divisible by gran_k = 128"):
        deep_gemm.per_channel_cast_to_fp8(x[:200], use_ue8m0)


@pytest.mark.parametrize("m, n", [(128, 256), (200, 300), (1, 129)])
@pytest.mark.parametrize("use_ue8m0", [False, True])
def test_per_block_cast(rng, m, n, use_ue8m0):
    x = rng.standard_normal((m, n), dtype=np.float32)
    q, sf = deep_gemm.per_block_cast_to_fp8(x, use_ue8m0)
    assert q.shape == (m, n) and q.flags.c_contiguous and sf.shape == ((m + 127) // 128, (n + 127) // 128)
    check_quantised(x, q, sf, 128, 128, use_ue8m0)


def test_per_custom_dims_cast(rng):
    x = rng.standard_normal((4, 6, 8), dtype=np.float32)
    q, sf = deep_gemm.per_custom_dims_cast_to_fp8(x, (0, 2), False)
    assert q.shape == x.shape and sf.shape == (4, 8)
    np.testing.assert_array_equal(sf, np.maximum(np.abs(x).max(axis=1), np.float32(1e-4)) / np.float32(448))
    expected = (x * (np.float32(1) / sf[:, None, :])).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(q.view(np.uint8), expected.view(np.uint8))


def test_casts_reject_bad_shapes():
    with pytest.raises(ValueError, match="per_token_cast_to_fp8: argument 'x' must be 2-D"):
        deep_gemm.per_token_cast_to_fp8(np.zeros(8, np.float32), False)
    with pytest.raises(ValueError, match="argument 'gran_k' must be a positive int"):
        deep_gemm.per_block_cast_to_fp8(np.zeros((8, 8), np.float32), False, gran_k=0)
