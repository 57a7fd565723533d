"""Trace-time numerics shared by the quantisation kernels (tile-language expressions, no kernels here).

The rules follow TileKernels' torch references, so results are bit-exact against them:
- a block's factor is sf = max(amax, clamp_min) / max_code and the multiplier sf_inv = max_code / max(...)
  (two IEEE float32 divisions); with round_sf both are powers of two, sf rounded up (2^ceil(log2 sf));
- FP8 e4m3 codes (uint8): x * sf_inv clamped to +-448, rounded to nearest even, NaN -> 0x7F;
- FP4 e2m1 codes: nearest of {0, .5, 1, 1.5, 2, 3, 4, 6} with ties to the even code, saturating at 6;
  the sign bit follows the float's sign (so -0.0 gives code 8).
"""
from .. import language as T

E4M3_MAX = 448.0
E2M1_MAX = 6.0
# Factor floors: TileKernels' defaults per output format.
CLAMP_MIN = {"e4m3": 1e-4, "e2m1": 6.0 * 2.0 ** -126}
MAX_CODE = {"e4m3": E4M3_MAX, "e2m1": E2M1_MAX}


def pow2(e):
    """2^e as an exact float32 for an int32 expression e in [-126, 127]."""
    return T.reinterpret((e + 127) * 8388608, "float32")


def ceil_log2(v):
    """ceil(log2(v)) for a positive normal float32 v, exactly: log2 gives a guess that is off by at most
    one near powers of two, which two exact comparisons correct."""
    guess = T.cast(T.ceil(T.log2(v)), "int32")
    p = pow2(guess)
    return T.if_then_else(p < v, guess + 1, T.if_then_else(p * 0.5 >= v, guess - 1, guess))


def sf_and_inv(amax, fmt: str, round_sf: bool, clamp_min=None):
    """(sf, sf_inv, ue8m0 exponent byte or None) for a block whose absolute maximum is amax (float32)."""
    floor = CLAMP_MIN[fmt] if clamp_min is None else clamp_min
    clamped = T.max(amax, T.cast(floor, "float32"))
    max_code = T.cast(MAX_CODE[fmt], "float32")
    if not round_sf:
        return clamped / max_code, max_code / clamped, None
    e = ceil_log2(clamped / max_code)
    return pow2(e), pow2(0 - e), e + 127


@T.macro
def e4m3(v):
    """The e4m3fn code (uint8) of v clamped to +-448, round to nearest even, in vector arithmetic: a binary
    search of four comparisons finds the binade 2^e of the magnitude (e in [-6, 8]; smaller magnitudes
    stay in e = -6), u = e + 6, and q = 2^(3 - e) exactly; a * q lies in [8, 16) (below 2^-6: the
    subnormal count a * 2^9, u = 0), adding and subtracting 2^23 rounds it to an integer, and the code
    is u * 8 + that integer (a rounding carry to 16 moves into the next binade by itself). NaN -> 0x7F."""
    c = T.clamp(v, -E4M3_MAX, E4M3_MAX)
    a = T.abs(c)
    b3 = a >= 4.0
    p3 = T.if_then_else(b3, 4.0, 2.0 ** -6)
    q3 = T.if_then_else(b3, 2.0, 512.0)
    b2 = a >= p3 * 16.0
    p2 = T.if_then_else(b2, p3 * 16.0, p3)
    q2 = T.if_then_else(b2, q3 * 0.0625, q3)
    b1 = a >= p2 * 4.0
    p1 = T.if_then_else(b1, p2 * 4.0, p2)
    q1 = T.if_then_else(b1, q2 * 0.25, q2)
    b0 = a >= p1 * 2.0
    q0 = T.if_then_else(b0, q1 * 0.5, q1)
    u8 = step(b3) * 64 + step(b2) * 32 + step(b1) * 16 + step(b0) * 8
    rounded = (a * q0 + 8388608.0) - 8388608.0
    code = T.if_then_else(T.isnan(v), 127, u8 + T.cast(rounded, "int32"))
    return T.cast(code + T.if_then_else((1.0 / c) < 0.0, 128, 0), "uint8")


def e4m3_stored(v):
    """The float32 whose store into a float8 e4m3 tensor writes e4m3(v)'s code: v clamped to +-448 (the
    store rounds to nearest even in lane arithmetic, about a third of e4m3's operations), NaN made
    positive (code 0x7F)."""
    return T.if_then_else(T.isnan(v), T.abs(v), T.clamp(v, -E4M3_MAX, E4M3_MAX))


def step(cond):
    return T.if_then_else(cond, T.cast(1, "int32"), T.cast(0, "int32"))


@T.macro
def e2m1_code(v):
    """The 4-bit e2m1 code (int32 in [0, 15]) of a float32 value, round to nearest even, saturating."""
    a = T.abs(v)
    # Ties go to the even code: up at 0.75, 1.75 and 3.5, down at 0.25, 1.25, 2.5 and 5.
    magnitude = (step(a > 0.25) + step(a >= 0.75) + step(a > 1.25) + step(a >= 1.75) + step(a > 2.5)
                 + step(a >= 3.5) + step(a > 5.0))
    negative = (1.0 / v) < 0.0  # true for negative values and for -0.0
    return magnitude + T.if_then_else(negative, T.cast(8, "int32"), T.cast(0, "int32"))


def e2m1_value(code):
    return T.decode_e2m1(code)


# ---- e5m6: 12-bit codes (sign, 5 exponent bits, 6 mantissa bits: the top 12 bits of a binary16) ----
E5M6_MAX = 65024.0
CLAMP_MIN["e5m6"] = 1e-4
MAX_CODE["e5m6"] = E5M6_MAX


def _let(name, value):
    """value bound once (the expressions below use it several times; inlined, they grow exponentially)."""
    from ..language._bits import _let as let

    return let(name, value)


def e5m6_code(v):
    """TileKernels' e5m6 code (int32, 0..4095) of a float32 v: v's binary16 bits with the 13 dropped
    mantissa bits truncated (subnormals by a shift, overflow to infinity, NaN to 0x7FFF), keeping the top
    12 bits, then adding one where (lowest kept bit + v's 17 low float32 bits) > 0x10000."""
    bits = _let("e56_bits", T.reinterpret(v, "int32"))
    sign = _let("e56_sign", (bits >> 16) & 0x8000)
    exp = _let("e56_exp", (bits >> 23) & 255)
    mant = _let("e56_mant", bits & 0x7FFFFF)
    normal = sign | ((exp - 112) << 10) | (mant >> 13)
    sub_shift = T.min(T.max(126 - exp, 0), 31)  # (113 - exp) + 13, for exp in [103, 112]
    subnormal = sign | ((mant | 0x800000) >> sub_shift)
    special = sign | T.if_then_else((exp == 255) & (mant != 0), 0x7FFF, 0x7C00)
    half = T.if_then_else(exp < 103, sign,
                          T.if_then_else(exp <= 112, subnormal, T.if_then_else(exp <= 142, normal, special)))
    code = _let("e56_code", half >> 4)
    up = T.if_then_else((code & 1) + (bits & 0x1FFFF) > 0x10000, 1, 0)
    return _let("e56_rounded", (code + up) & 0xFFF)


def e5m6_value(code):
    """The float32 value of a 12-bit e5m6 code (int32): its binary16 with four zero bits below."""
    half = T.cast((code & 0xFFF) << 4, "int16")
    return T.cast(T.reinterpret(half, "float16"), "float32")


def pack_e5m6(c):
    """Eight codes (int32) -> three 32-bit words (int32 bit patterns), TileKernels' packing: w0 = c0 c1
    c2[11:4], w1 = c2[3:0] c3 c4 c5[11:8], w2 = c5[7:0] c6 c7 (most significant first)."""
    u = [_let("e56_u", T.cast(x, "uint32")) for x in c]
    w0 = (u[0] << 20) | (u[1] << 8) | (u[2] >> 4)
    w1 = ((u[2] & 15) << 28) | (u[3] << 16) | (u[4] << 4) | (u[5] >> 8)
    w2 = ((u[5] & 255) << 24) | (u[6] << 12) | u[7]
    return [T.cast(w, "int32") for w in (w0, w1, w2)]


def unpack_e5m6(w):
    """Three words (int32 bit patterns) -> the eight codes (int32)."""
    u = [_let("e56_w", T.cast(x, "uint32")) for x in w]
    codes = [u[0] >> 20, (u[0] >> 8) & 0xFFF, ((u[0] & 255) << 4) | (u[1] >> 28), (u[1] >> 16) & 0xFFF,
             (u[1] >> 4) & 0xFFF, ((u[1] & 15) << 8) | (u[2] >> 24), (u[2] >> 12) & 0xFFF, u[2] & 0xFFF]
    return [T.cast(c, "int32") for c in codes]
