"""tessera.tile_kernels.quant's e5m6 casts: codes bit for bit against a numpy model of TileKernels' rule
(binary16 bits with the dropped mantissa truncated, top 12 bits kept, one added where the lowest kept
bit plus the float's 17 low bits exceed 0x10000), the packing of eight codes in three words, every
factor layout, the decode back, and the round trip against float64 (relative error of a 6-bit
mantissa)."""
import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera.tile_kernels import quant as Q

BF16 = ml_dtypes.bfloat16


def codes_model(v):
    bits = np.asarray(v, np.float32).view(np.int32).astype(np.int64)
    sign = (bits >> 16) & 0x8000
    exp = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    sub = sign | ((mant | 0x800000) >> np.clip(126 - exp, 0, 31))
    normal = sign | ((exp - 112) << 10) | (mant >> 13)
    special = sign | np.where((exp == 255) & (mant != 0), 0x7FFF, 0x7C00)
    half = np.where(exp < 103, sign, np.where(exp <= 112, sub, np.where(exp <= 142, normal, special)))
    code = half >> 4
    return (code + (((code & 1) + (bits & 0x1FFFF)) > 0x10000)) & 0xFFF


def pack_model(codes):
    c = codes.reshape(codes.shape[0], -1, 8).astype(np.uint64)
    w0 = (c[..., 0] << 20) | (c[..., 1] << 8) | (c[..., 2] >> 4)
    w1 = ((c[..., 2] & 15) << 28) | (c[..., 3] << 16) | (c[..., 4] << 4) | (c[..., 5] >> 8)
    w2 = ((c[..., 5] & 255) << 24) | (c[..., 6] << 12) | c[..., 7]
    words = np.stack([w0, w1, w2], -1).astype(np.uint32).reshape(codes.shape[0], -1)
    return words.view(np.uint8)


def decode_model(codes):
    return (codes.astype(np.uint16) << 4).view(np.float16).astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("round_sf,col,packed", [(False, False, False), (True, False, False), (False, True, False),
                                                 (True, True, True)])
def test_per_token_cast_to_e5m6_bitwise(rng, dtype, round_sf, col, packed):
    tokens, hidden = 13, 136
    x = (rng.standard_normal((tokens, hidden)) * np.exp(rng.uniform(-8, 8, (tokens, 1)))).astype(dtype)
    x[2, :8] = [0.0, -0.0, 1e-30, -1e-30, 3e-5, -7e-6, 1.0, -1.0]
    data, sf = Q.per_token_cast_to_e5m6(x, hidden, use_tma_aligned_col_major_sf=col, round_sf=round_sf,
                                        use_packed_ue8m0=packed)
    assert data.dtype == np.uint8 and data.shape == (tokens, hidden * 3 // 2)
    xf = x.astype(np.float32)
    amax = np.maximum(np.abs(xf).max(1), np.float32(1e-4))
    if round_sf:
        e = np.ceil(np.log2((amax / np.float32(65024.0)).astype(np.float64))).astype(np.int64)
        sf_want, inv = np.exp2(e).astype(np.float32), np.exp2(-e).astype(np.float32)
    else:
        sf_want, inv = amax / np.float32(65024.0), np.float32(65024.0) / amax
    codes = codes_model(xf * inv[:, None])
    assert np.array_equal(data, pack_model(codes))
    if packed:
        got_sf = np.asarray(sf).view(np.uint8).reshape(tokens, 4)[:, 0].astype(np.int64)
        assert np.array_equal(got_sf, e + 127)
    else:
        assert np.array_equal(np.asarray(sf)[:, 0], sf_want)
    for fmt, out_dtype in (("fp32", np.float32), ("bf16", BF16)):
        back = Q.cast_back((data, sf), fmt, (1, hidden), x_special_fmt="e5m6")
        want = (decode_model(codes) * np.asarray(sf_want, np.float64)[:, None]).astype(np.float32).astype(out_dtype)
        assert back.dtype == out_dtype and np.array_equal(back.view(np.uint8), want.view(np.uint8))
    back = Q.cast_back_e5m6((data, sf), "fp32", (1, hidden)).astype(np.float64)
    big = np.abs(xf) > amax[:, None] * 2 ** -14  # normal e5m6 range after scaling
    np.testing.assert_allclose(back[big], xf[big], rtol=2 ** -7)


def test_e5m6_rounding_boundaries_and_specials():
    # one token whose maximum is 65024 (scale 1): the codes are those of the values themselves
    vals = np.array([65024.0, 1.0, 1.0 + 2 ** -7, 1.0 + 2 ** -7 + 2 ** -20, 1.0 + 3 * 2 ** -7, 2 ** -14, 2 ** -20,
                     2 ** -25, -2 ** -14 * 1.5, -0.0, 0.0, 65000.0, 3.0 * 2 ** -7, -1.0 - 2 ** -7, 5e-8, 1e-3],
                    np.float32)
    data, sf = Q.per_token_cast_to_e5m6(vals[None], 16)
    assert float(np.asarray(sf)[0, 0]) == 1.0
    codes = codes_model(vals)
    assert np.array_equal(data, pack_model(codes[None]))
    assert codes[2] == codes[1]  # a tie (kept lsb 0, 17 low bits 0x10000) stays
    assert codes[3] == codes[1] + 1  # past the tie rounds up
    assert codes[4] == codes[1] + 2  # a tie above an odd code rounds up (to even)


def test_e5m6_errors():
    with pytest.raises(tessera.InvalidArgumentError, match=r"per_token_cast_to_e5m6: argument 'num_per_channels' must "
                                                           r"equal hidden"):
        Q.per_token_cast_to_e5m6(np.zeros((2, 64), np.float32), 32)
    with pytest.raises(tessera.InvalidArgumentError, match=r"hidden must be a multiple of 8"):
        Q.per_token_cast_to_e5m6(np.zeros((2, 12), np.float32), 12)
    with pytest.raises(tessera.InvalidArgumentError, match=r"cast_back_e5m6: argument 'x\[0\]' must hold whole"):
        Q.cast_back_e5m6((np.zeros((2, 10), np.uint8), np.ones((2, 1), np.float32)), "fp32", (1, 6))
