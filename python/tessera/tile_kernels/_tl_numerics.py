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
