"""deep_gemm FP4 utilities (DeepGEMM's API, docs/gemm.md): per_token_cast_to_fp4 (scales, the midpoint
rule bit for bit, nibble order, packed UE8M0), transpose_packed_fp4, cast_back_from_fp4, bad input."""
import ml_dtypes
import numpy as np
import pytest

from helpers import BF16
from tessera import deep_gemm
from tessera.deep_gemm.testing import calc_diff

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
MIDPOINTS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]


def code_of(v: float) -> int:
    """The reference rule, one Python float at a time: magnitude code = midpoints strictly below |v|."""
    index = sum(1 for mid in MIDPOINTS if mid < min(abs(v), 6.0))
    return index | (8 if v < 0 and index else 0)


def nibbles(packed: np.ndarray) -> np.ndarray:
    b = packed.view(np.uint8)
    out = np.empty((b.shape[0], 2 * b.shape[1]), np.uint8)
    out[:, 0::2], out[:, 1::2] = b & 0xF, b >> 4
    return out


def value_of(code: int) -> float:
    return (-1.0 if code & 8 else 1.0) * E2M1[code & 7]


@pytest.mark.parametrize("use_ue8m0", [False, True])
@pytest.mark.parametrize("m, n, gran_k", [(3, 64, 32), (5, 46, 32), (2, 300, 128), (1, 2, 32)])
def test_per_token_cast_to_fp4_follows_the_reference_rule(rng, use_ue8m0, m, n, gran_k):
    x = (rng.standard_normal((m, n)) * rng.uniform(0.01, 100)).astype(np.float32)
    q, sf = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=use_ue8m0, gran_k=gran_k)
    sf_k = -(-n // gran_k)
    assert q.dtype == np.int8 and q.shape == (m, n // 2) and q.flags.c_contiguous
    assert sf.dtype == np.float32 and sf.shape == (m, sf_k)
    for r in range(m):
        for j in range(sf_k):
            amax = np.float32(max(np.abs(x[r, j * gran_k:(j + 1) * gran_k]).max(), np.float32(1e-4)))
            want = amax / np.float32(6)
            if use_ue8m0:
                assert sf[r, j] >= want and sf[r, j] < 2 * want and not sf[r, j:j + 1].view(np.int32)[0] & 0x7FFFFF
            else:
                assert sf[r, j] == want
    inverse = (np.float32(1) / sf)[:, np.arange(n) // gran_k]
    expected = np.array([[code_of(float(v)) for v in row] for row in x * inverse], np.uint8)
    np.testing.assert_array_equal(nibbles(q), expected)


def test_fp4_ties_go_to_the_smaller_magnitude_and_no_negative_zero():
    # one block of 32 with amax 6 -> sf = 1, so these values are quantised as they are
    probes = [0.25, 0.2500001, 0.75, 0.76, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 6.0, -0.1, -0.25, -0.3, -6.0, 0.0]
    x = np.zeros((1, 32), np.float32)
    x[0, :len(probes)] = probes
    x[0, 31] = 6.0
    q, sf = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=False, gran_k=32)
    assert sf[0, 0] == 1.0
    got = [value_of(int(c)) for c in nibbles(q)[0, :len(probes)]]
    assert got == [0.0, 0.5, 0.5, 1.0, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 6.0, 0.0, 0.0, -0.5, -6.0, 0.0]
    assert not np.any(nibbles(q) == 8), "the quantiser must not produce a negative zero"


def test_fp4_element_2i_is_the_low_nibble():
    x = np.zeros((1, 32), np.float32)
    x[0, :4] = [6.0, 0.5, -1.0, 3.0]  # codes 7, 1, 0xA, 5
    q, _ = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=False, gran_k=32)
    assert q.view(np.uint8)[0, :2].tolist() == [0x17, 0x5A]


def test_packed_ue8m0_scales_and_bfloat16_input(rng):
    x = rng.standard_normal((4, 256)).astype(BF16)
    q, sf = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32)
    q2, packed = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
    np.testing.assert_array_equal(q, q2)
    assert packed.dtype == np.int32 and packed.shape == (4, 2)
    np.testing.assert_array_equal(deep_gemm.unpack_ue8m0_from_int(packed), sf)
    with pytest.raises(ValueError, match="'use_packed_ue8m0' needs 'use_ue8m0'"):
        deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=False, gran_k=32, use_packed_ue8m0=True)


def test_cast_back_from_fp4_dequantises(rng):
    x = rng.standard_normal((6, 128)).astype(np.float32)
    for use_packed in (False, True):
        q, sf = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32, use_packed_ue8m0=use_packed)
        y = deep_gemm.cast_back_from_fp4(q, sf, gran_k=32, use_packed_ue8m0=use_packed)
        assert y.dtype == np.float32 and y.shape == x.shape
        scales = deep_gemm.unpack_ue8m0_from_int(sf) if use_packed else sf
        codes = nibbles(q)
        expected = np.array([[value_of(int(c)) for c in row] for row in codes], np.float32)
        np.testing.assert_array_equal(y, expected * scales[:, np.arange(128) // 32])
        diff = calc_diff(x, y)
        print(f"FP4 round trip calc_diff={diff:.2e}")
        assert diff < 2e-2


def test_transpose_packed_fp4_moves_values(rng):
    x = rng.standard_normal((8, 64)).astype(np.float32)
    q, _ = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32)
    t = deep_gemm.transpose_packed_fp4(q)
    assert t.dtype == np.int8 and t.shape == (64, 4) and t.flags.c_contiguous
    np.testing.assert_array_equal(nibbles(t), nibbles(q).T)
    np.testing.assert_array_equal(deep_gemm.transpose_packed_fp4(t), q)
    # transpose(q).T is the same matrix stored MN-major (packed along M)
    assert t.T.shape == (4, 64) and t.T.strides == (1, 4)


def test_fp4_utilities_reject_bad_input():
    with pytest.raises(ValueError, match="even number of columns"):
        deep_gemm.per_token_cast_to_fp4(np.ones((2, 33), np.float32), use_ue8m0=True, gran_k=32)
    with pytest.raises(ValueError, match="must be 2-D"):
        deep_gemm.per_token_cast_to_fp4(np.ones(32, np.float32), use_ue8m0=True)
    with pytest.raises(ValueError, match="even number of rows"):
        deep_gemm.transpose_packed_fp4(np.zeros((3, 4), np.int8))
    with pytest.raises(ValueError, match="2-D int8"):
        deep_gemm.transpose_packed_fp4(np.zeros((4, 4), ml_dtypes.float8_e4m3fn))
    with pytest.raises(ValueError, match="argument 'sf' must have shape"):
        deep_gemm.cast_back_from_fp4(np.zeros((2, 32), np.int8), np.ones((2, 1), np.float32), gran_k=32)


def former_numpy_encoder(x: np.ndarray) -> np.ndarray:
    """The midpoint rule as fp4.py wrote it in numpy before it used the extension's encoder."""
    index = np.searchsorted(np.float32(MIDPOINTS), np.minimum(np.abs(x), np.float32(6)), side="left").astype(np.uint8)
    return index | (((x < 0) & (index != 0)).astype(np.uint8) << 3)


def every_fp32_class(rng) -> np.ndarray:
    """Normals across every exponent, subnormals, ties and their neighbours, zeros, values past the max,
    infinities and NaNs (quiet, signalling, negative), each with both signs."""
    normals = rng.integers(0x00800000, 0x7F800000, size=200_000, dtype=np.uint32).view(np.float32)
    subnormals = rng.integers(1, 0x00800000, size=20_000, dtype=np.uint32).view(np.float32)
    ties = np.float32(MIDPOINTS + E2M1)
    neighbours = np.concatenate([np.nextafter(ties, np.float32(0)), np.nextafter(ties, np.float32(np.inf))])
    past_max = np.float32([6.0, 6.5, 7.0, 1e10, np.finfo(np.float32).max])
    specials = np.array([0x00000000, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FBFFFFF], np.uint32).view(np.float32)
    x = np.concatenate([normals, subnormals, ties, neighbours, past_max, specials])
    return np.concatenate([x, -x])


def test_fp4_encoder_is_the_extensions_and_matches_the_former_rule_bit_for_bit(rng):
    from tessera import _C
    from tessera.deep_gemm.utils import fp4

    x = every_fp32_class(rng)
    ours = fp4._encode_e2m1(x)
    assert ours.dtype == np.uint8 and ours.shape == x.shape
    np.testing.assert_array_equal(ours, _C.cast_from_f32(x, "float4_e2m1fn_deepgemm"))
    nan = np.isnan(x)
    assert nan.sum() == 6 and not ours[nan].any()  # NaN -> +0, the library's e2m1 rule (the old code gave 7)
    expected = former_numpy_encoder(x[~nan])
    differ = np.flatnonzero(ours[~nan] != expected)
    assert differ.size == 0, f"{differ.size} codes differ, first x={x[~nan][differ[:5]]}"
    # Spot checks by hand: ties go down, saturation at 6 and inf, no negative zero from subnormals.
    spot = np.float32([0.25, 0.75, 5.0, 5.0000005, np.inf, -np.inf, -1e-45, 7.0])
    assert fp4._encode_e2m1(spot).tolist() == [0, 1, 6, 7, 7, 15, 0, 7]
