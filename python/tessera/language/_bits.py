"""``T.reinterpret``: an integer's bits read as a float16 / bfloat16 / float32, computed from the
sign, exponent and mantissa fields with exact arithmetic (the IR has no bit cast). Other directions
(float bits as an integer) raise NotImplementedInTessera."""
from . import _context as ctx
from ._dtypes import DType, canonical
from ._expr import Expr, as_node, cast
from ._math import if_then_else, infinity, max as tl_max

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


def reinterpret(a, b):
    """``T.reinterpret(value, dtype)`` (TileLang) or ``reinterpret(dtype, value)`` (TVM's order)."""
    dtype, value = (a, b) if isinstance(a, (str, DType)) else (b, a)
    target = canonical(dtype)
    if not isinstance(value, Expr):
        raise ctx.error(f"T.reinterpret: value must be a symbolic integer, got {value!r}")
    source = value.dtype
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
