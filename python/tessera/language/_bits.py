"""``T.reinterpret``: an integer's bits read as a float16 / bfloat16 / float32, computed from the
sign, exponent and mantissa fields with exact arithmetic (the IR has no bit cast). Other directions
of float bits as an integer: float32 as int32 / uint32, computed from the value (exponent by log2,
corrected against exact powers of two; mantissa by exact scaling), and float16 as int16 / uint16.
-0.0 keeps its sign bit (found as 1 / -0.0 < 0); every NaN gives the canonical quiet NaN 0x7fc00000
(0x7e00 for float16); other directions raise NotImplementedInTessera. ``__float2half_rz`` (T.call_extern)
rounds a float32 toward zero to float16 through the same fields."""
from . import _context as ctx
from ._dtypes import DType, canonical
from ._expr import Expr, as_node, cast
from ._math import floor, if_then_else, infinity, isinf, isnan, log2, max as tl_max, min as tl_min

_FORMATS = {"float16": (5, 10, 16), "bfloat16": (8, 7, 16), "float32": (8, 23, 32)}  # exponent, mantissa, width
_INT_WIDTH = {"int16": 16, "uint16": 16, "int32": 32, "uint32": 32}


def _let(name, value):
    """value bound once (so the expression trees below share it instead of repeating it)."""
    node = as_node(value)
    if node.const_value() is not None or node.var_name() is not None:
        return value
    ctx.set_loc()
    return Expr(ctx.current("T.reinterpret").builder.let(name, node))


def _pow2(k):
    """2.0 ** k (float32) for an int expression k in [-149, 127], exactly: a product of the powers
    2^(+-2^b) of k's bits, each a representable float32."""
    negative = _let("rb_neg", k < 0)
    magnitude = _let("rb_mag", if_then_else(negative, 0 - k, k))
    result = cast("float32", 1.0)
    for b in reversed(range(8)):
        step = 1 << b
        factor = if_then_else(negative, cast("float32", 2.0 ** -step), cast("float32", 2.0 ** step)) if step < 128 \
            else cast("float32", 2.0 ** -step)
        result = result * if_then_else(((magnitude >> b) & 1) == 1, factor, cast("float32", 1.0))
    return result


def reinterpret(a, b=None, dtype=None):
    """``T.reinterpret(value, dtype)`` / ``T.reinterpret(value, dtype=...)`` (TileLang) or
    ``reinterpret(dtype, value)`` (TVM's order)."""
    if dtype is not None:
        a, b = dtype, a
    if b is None:
        raise ctx.error("T.reinterpret: give the value and the dtype")
    dtype, value = (a, b) if isinstance(a, (str, DType)) else (b, a)
    if str(dtype) == "handle":  # a TVM handle, only read as T.attr's value (_allreduce.py)
        from ._allreduce import HandleToken

        return HandleToken()
    target = canonical(dtype)
    if not isinstance(value, Expr):
        raise ctx.error(f"T.reinterpret: value must be a symbolic integer, got {value!r}")
    source = value.dtype
    if source == "float32" and target in ("int32", "uint32"):
        return cast(target, _float32_bits(value))
    if source == "float16" and target in ("int16", "uint16"):  # exact: a float16 is a float32 too
        return cast(target, _half_bits_toward_zero(_float32_bits(cast("float32", value))))
    if target not in _FORMATS or _INT_WIDTH.get(source) != _FORMATS[target][2]:
        raise ctx.not_implemented(f"T.reinterpret({source} -> {target}): only the bits of a 16-bit integer as float16 / "
                                  f"bfloat16 and of a 32-bit integer as float32 are supported")
    e_bits, m_bits, width = _FORMATS[target]
    bits = _let("rb_bits", cast("int64", value) & ((1 << width) - 1))
    sign = (bits >> (width - 1)) & 1
    exponent = _let("rb_exp", (bits >> m_bits) & ((1 << e_bits) - 1))
    mantissa = _let("rb_man", bits & ((1 << m_bits) - 1))
    bias = (1 << (e_bits - 1)) - 1
    full = if_then_else(exponent == 0, mantissa, mantissa + (1 << m_bits))
    scale = _let("rb_scale", cast("int32", tl_max(exponent, 1) - bias - m_bits))
    magnitude = _let("rb_mag", cast("float32", full) * _pow2(scale))
    top = (1 << e_bits) - 1
    inf = infinity("float32")
    magnitude = if_then_else(exponent == top, if_then_else(mantissa == 0, inf, inf - inf), magnitude)
    return cast(target, if_then_else(sign == 1, magnitude * -1.0, magnitude))  # -1.0 * 0 is -0.0


def _half_bits_toward_zero(bits):
    """The float16 bits of the float32 whose bits (int64) are given, rounded toward zero (CUDA's
    __float2half_rz): finite values past the float16 range give its largest finite value."""
    b = _let("hb_bits", bits)
    e = _let("hb_exp", (b >> 23) & 0xFF)
    m = _let("hb_man", b & 0x7FFFFF)
    e16 = e - 112
    normal = (e16 << 10) | (m >> 13)
    # below float16's normal range: the value * 2^24, truncated = (m + 2^23) >> (126 - e)
    subnormal = if_then_else(e >= 103, (m | 0x800000) >> tl_min(126 - e, 63), cast("int64", 0))
    special = cast("int64", 0x7C00) | if_then_else(m != 0, cast("int64", 0x200), cast("int64", 0))
    magnitude = if_then_else(e == 255, special, if_then_else(e16 >= 31, cast("int64", 0x7BFF),
                                                             if_then_else(e16 >= 1, normal, subnormal)))
    return (((b >> 31) & 1) << 15) | magnitude


def float2half_rz(value):
    """CUDA's __float2half_rz: a float32 to float16, rounding toward zero."""
    bits = _half_bits_toward_zero(_float32_bits(cast("float32", value)))
    return reinterpret(cast("uint16", bits), "float16")


def _float32_bits(value):
    """The IEEE-754 bits of a float32 value, as an int64 in [0, 2^32)."""
    x = _let("fb_x", cast("float64", value))
    a = _let("fb_a", if_then_else(x < 0.0, 0.0 - x, x))
    guess = cast("int32", floor(log2(if_then_else(a > 0.0, a, 1.0))))
    guess = _let("fb_guess", if_then_else(guess < -149, -149, if_then_else(guess > 127, 127, guess)))
    low = cast("float64", _pow2(guess))  # log2 may round across a power of two: correct by one step
    e = _let("fb_e", if_then_else(low > a, guess - 1, if_then_else(low * 2.0 <= a, guess + 1, guess)))
    normal = e >= -126
    # a / 2^e in [1, 2) for normals; subnormals are a * 2^149 = a * 2^126 * 2^23 (exact scalings)
    scaled = if_then_else(normal, a * cast("float64", _pow2(0 - tl_max(e, -126))), a * 2.0 ** 126)
    mantissa = cast("int64", if_then_else(normal, (scaled - 1.0) * 2.0 ** 23, scaled * 2.0 ** 23))
    exponent = if_then_else(normal, cast("int64", e) + 127, cast("int64", 0))
    magnitude = if_then_else(a == 0.0, cast("int64", 0), (exponent << 23) | mantissa)
    magnitude = if_then_else(isinf(x), cast("int64", 0x7F800000), magnitude)
    negative = (x < 0.0) | ((x == 0.0) & (1.0 / if_then_else(x == 0.0, x, 1.0) < 0.0))  # 1 / -0.0 is -inf
    sign = if_then_else(negative, cast("int64", 1 << 31), cast("int64", 0))
    return if_then_else(isnan(x), cast("int64", 0x7FC00000), sign | magnitude)


def popcount(x):
    """The number of set bits of an integer (its dtype's width; a signed value counts its two's
    complement bits), as int32: a sum of its bits, shifted out one by one."""
    node = as_node(x)
    widths = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64, "uint64": 64}
    bits = widths.get(str(node.dtype))
    if bits is None:
        raise ctx.error(f"T.popcount: the argument must be an integer, got {node.dtype}")
    unsigned = cast("uint" + str(bits), Expr(node)) if not str(node.dtype).startswith("u") else Expr(node)
    total = None
    for k in range(bits):
        bit = cast("int32", (unsigned >> k) & 1)
        total = bit if total is None else total + bit
    return total
