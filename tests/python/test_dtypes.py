"""tessera's scalar dtype conversions (tessera/core/dtype.h) against ml_dtypes and numpy, bit for bit.

Decoding is checked on every encoding; encoding on every bf16-valued float32 pattern, one million random
float32 patterns, and every midpoint between neighbouring representable values (plus the float32 values
on either side of each midpoint). NaN inputs are checked against the header's documented results
instead of ml_dtypes, where the header documents a deliberate choice.
"""
import ml_dtypes
import numpy as np
import pytest

from tessera import _C

# NaN and out-of-range inputs are the point here; numpy's cast warnings about them are expected.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:overflow encountered:RuntimeWarning")

# name -> (numpy dtype, code width)
FORMATS = {
    "bfloat16": (np.dtype(ml_dtypes.bfloat16), np.uint16),
    "float16": (np.dtype(np.float16), np.uint16),
    "float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), np.uint8),
    "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), np.uint8),
    "float8_e8m0fnu": (np.dtype(ml_dtypes.float8_e8m0fnu), np.uint8),
    "float4_e2m1fn": (np.dtype(ml_dtypes.float4_e2m1fn), np.uint8),
}
NUM_CODES = {np.uint16: 1 << 16, np.uint8: 1 << 8}


def all_codes(name):
    dtype, width = FORMATS[name]
    n = 16 if name == "float4_e2m1fn" else NUM_CODES[width]
    return np.arange(n, dtype=width)


def assert_same_f32(ours, theirs, inputs, what):
    """Bitwise equality, except that two NaNs match whatever their payloads."""
    ob, tb = ours.view(np.uint32), theirs.view(np.uint32)
    bad = (ob != tb) & ~(np.isnan(ours) & np.isnan(theirs))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        pytest.fail(f"{what}: {int(bad.sum())} mismatches; first: input {inputs[i]!r} -> ours 0x{int(ob[i]):08x} "
                    f"({ours[i]}), reference 0x{int(tb[i]):08x} ({theirs[i]})")


def assert_same_codes(ours, theirs, inputs, what):
    bad = ours != theirs
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} mismatches; first: input {inputs[i]!r} "
                    f"(0x{int(inputs.view(np.uint32)[i]):08x}) -> ours 0x{int(ours[i]):x}, reference 0x{int(theirs[i]):x}")


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_decode_every_encoding(name):
    dtype, _ = FORMATS[name]
    codes = all_codes(name)
    ours = _C.to_f32(codes, name)
    theirs = codes.view(dtype).astype(np.float32)
    assert ours.dtype == np.float32 and ours.shape == codes.shape
    assert_same_f32(ours, theirs, codes, f"decode {name}")
    print(f"decode {name}: {codes.size} encodings match")


def midpoint_inputs(name):
    """Midpoints between neighbouring finite values of the format and the float32 values next to them."""
    dtype, _ = FORMATS[name]
    values = np.unique(all_codes(name).view(dtype).astype(np.float64))
    values = values[np.isfinite(values)]
    mids = ((values[:-1] + values[1:]) / 2).astype(np.float32)
    assert np.array_equal(mids.astype(np.float64), (values[:-1] + values[1:]) / 2), "midpoints must be exact in f32"
    return np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])


def encode_inputs(name, rng):
    bf16_valued = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    random_patterns = rng.integers(0, 1 << 32, size=1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([bf16_valued, random_patterns, midpoint_inputs(name)])


def f16_nan(sign, bits):
    """numpy's software rule (x86): the payload's top 10 bits, kept non-zero, no quiet bit forced. numpy on
    AArch64 converts with the FPU instead (FCVT sets the quiet bit), so the rule is spelled out here."""
    payload = (bits & 0x7FFFFF) >> 13
    return (sign << 15) | 0x7C00 | np.where(payload == 0, 1, payload)


# NaN results the header documents (sign kept where the format has one), from the input's sign and bits.
NAN_RESULT = {
    "bfloat16": lambda sign, bits: 0x7FC0 | (sign << 15),
    "float16": f16_nan,
    "float8_e4m3fn": lambda sign, bits: 0x7F | (sign << 7),
    "float8_e5m2": lambda sign, bits: 0x7E | (sign << 7),
    "float4_e2m1fn": lambda sign, bits: 0 * sign,
    "float8_e8m0fnu": lambda sign, bits: 0 * sign + 0xFF,
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_encode_matches_ml_dtypes(name, rng):
    dtype, width = FORMATS[name]
    x = encode_inputs(name, rng)
    ours = _C.cast_from_f32(x, name)
    assert ours.dtype == width and ours.shape == x.shape
    theirs = x.astype(dtype).view(np.uint8 if dtype.itemsize == 1 else np.uint16)
    if name == "float4_e2m1fn":
        theirs = theirs & 0xF
    nan = np.isnan(x)
    assert_same_codes(ours[~nan], theirs[~nan], x[~nan], f"encode {name}")
    bits = x[nan].view(np.uint32).astype(np.int64)
    expected = NAN_RESULT[name](bits >> 31, bits).astype(width)
    assert_same_codes(ours[nan], expected, x[nan], f"encode {name} NaN inputs (documented result)")
    print(f"encode {name}: {x.size} inputs ({int(nan.sum())} NaN) match")


def test_e4m3_saturating_variant(rng):
    x = encode_inputs("float8_e4m3fn", rng)
    x = x[~np.isnan(x)]
    ours = _C.cast_from_f32(x, "float8_e4m3fn_sat")
    theirs = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert_same_codes(ours, theirs, x, "encode float8_e4m3fn_sat")


def test_e5m2_saturating_variant(rng):
    x = encode_inputs("float8_e5m2", rng)
    x = x[~np.isnan(x)]
    ours = _C.cast_from_f32(x, "float8_e5m2_sat")
    theirs = np.clip(x, -57344, 57344).astype(ml_dtypes.float8_e5m2).view(np.uint8)
    assert_same_codes(ours, theirs, x, "encode float8_e5m2_sat")


def test_e2m1_deepgemm_midpoint_rule(rng):
    x = encode_inputs("float4_e2m1fn", rng)
    x = x[~np.isnan(x)]
    ours = _C.cast_from_f32(x, "float4_e2m1fn_deepgemm")
    midpoints = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float32)
    code = np.searchsorted(midpoints, np.abs(x), side="left").astype(np.uint8)  # midpoints strictly below |x|
    theirs = np.where((x < 0) & (code != 0), code | 8, code).astype(np.uint8)
    assert_same_codes(ours, theirs, x, "encode float4_e2m1fn_deepgemm")


def test_ue8m0_ceil_variant(rng):
    x = encode_inputs("float8_e8m0fnu", rng)
    x = x[np.isfinite(x)]
    ours = _C.cast_from_f32(x, "float8_e8m0fnu_ceil")
    b = np.abs(x).view(np.uint32)
    theirs = np.clip((b >> 23) + ((b & 0x7FFFFF) != 0), 1, 254).astype(np.uint8)
    assert_same_codes(ours, theirs, x, "encode float8_e8m0fnu_ceil")


def test_casts_keep_shape_and_reject_bad_names():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert _C.cast_from_f32(x, "bfloat16").shape == (2, 3, 4)
    assert _C.to_f32(np.zeros((5, 2), np.uint8), "float8_e4m3fn").shape == (5, 2)
    with pytest.raises(ValueError, match="cast_from_f32: argument 'dtype'"):
        _C.cast_from_f32(x, "float7")
    with pytest.raises(ValueError, match="to_f32: argument 'codes' must hold 16-bit"):
        _C.to_f32(np.zeros(3, np.uint8), "bfloat16")
