"""Math and helper functions of the tile language (``T.exp``, ``T.max``, ``T.if_then_else``, ...).
With Python-number arguments they compute the Python value (trace-time constants stay constants)."""
import math
import numbers

from .. import _C
from . import _context as ctx
from ._dtypes import canonical
from ._expr import Deferred, Expr, as_node, cast, deferred_outside_trace, is_symbolic, wrap


def _number(x):
    return isinstance(x, numbers.Real) and not isinstance(x, Expr)


def call(name, *args):
    if deferred_outside_trace(*args):
        return Deferred(lambda: call(name, *args))
    nodes = [as_node(a) for a in args]
    ctx.set_loc()
    return wrap(_C.tl_call(name, nodes))


def _unary(name, py):
    def f(x):
        if _number(x) and py is not None:
            return py(x)
        return call(name, x)

    f.__name__ = name
    f.__doc__ = f"T.{name}(x): elementwise {name} (float32 math for narrower floats)."
    return f


exp = _unary("exp", math.exp)
exp2 = _unary("exp2", lambda x: 2.0 ** x)
log = _unary("log", math.log)
log2 = _unary("log2", math.log2)
sqrt = _unary("sqrt", math.sqrt)
rsqrt = _unary("rsqrt", lambda x: 1.0 / math.sqrt(x))
tanh = _unary("tanh", math.tanh)
sigmoid = _unary("sigmoid", lambda x: 1.0 / (1.0 + math.exp(-x)))
floor = _unary("floor", math.floor)
ceil = _unary("ceil", math.ceil)
trunc = _unary("trunc", math.trunc)
round = _unary("round", None)  # noqa: A001 - T.round
sin = _unary("sin", math.sin)
cos = _unary("cos", math.cos)
erf = _unary("erf", math.erf)
isnan = _unary("isnan", None)
isinf = _unary("isinf", None)


def abs(x):  # noqa: A001 - T.abs
    return x if _number(x) and x >= 0 else (-x if _number(x) else call("abs", x))


def pow(x, y):  # noqa: A001 - T.pow
    return x ** y if _number(x) and _number(y) else call("pow", x, y)


def fma(a, b, c):
    return call("fma", a, b, c)


def decode_e2m1(code):
    """tessera extension: the float32 value of a float4 e2m1 code (low 4 bits of an integer)."""
    return call("decode_e2m1", code)


def _binop(op, a, b):
    if deferred_outside_trace(a, b):
        return Deferred(lambda: _binop(op, a, b))
    na, nb = as_node(a), as_node(b)
    ctx.set_loc()
    return wrap(_C.tl_binary(op, na, nb))


def max(a, b, *rest):  # noqa: A001 - T.max
    """T.max(a, b, ...): the larger value (NaN-propagation as in C's a > b ? a : b)."""
    if rest:
        return max(max(a, b), *rest)
    if _number(a) and _number(b):
        return a if a >= b else b
    return _binop("max", a, b)


def min(a, b, *rest):  # noqa: A001 - T.min
    if rest:
        return min(min(a, b), *rest)
    if _number(a) and _number(b):
        return a if a <= b else b
    return _binop("min", a, b)


def clamp(x, lo, hi):
    return min(max(x, lo), hi)


def ceildiv(a, b):
    """ceil(a / b) for non-negative integers (a Python int when both are)."""
    if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral) and not is_symbolic(a) and not is_symbolic(b):
        return -(-int(a) // int(b))
    if deferred_outside_trace(a, b):
        return Deferred(lambda: ceildiv(a, b))
    na, nb = as_node(a), as_node(b)
    ctx.set_loc()
    return wrap(_C.tl_ceildiv(na, nb))


def floordiv(a, b):
    return a // b


def floormod(a, b):
    return a % b


def truncdiv(a, b):
    """Integer division rounding toward zero."""
    q = a // b
    return if_then_else((a % b != 0) & ((a < 0) != (b < 0)), q + 1, q) if is_symbolic(a) or is_symbolic(b) else int(a / b)


def if_then_else(cond, then_value, else_value):
    """cond ? then_value : else_value; only the chosen side is evaluated (its loads never run
    for lanes that take the other side)."""
    if not is_symbolic(cond):
        return then_value if cond else else_value
    if deferred_outside_trace(cond, then_value, else_value):
        return Deferred(lambda: if_then_else(cond, then_value, else_value))
    nc, nt, nf = as_node(cond), as_node(then_value), as_node(else_value)
    ctx.set_loc()
    return wrap(_C.tl_select(nc, nt, nf))


def infinity(dtype="float32"):
    ctx.set_loc()
    return wrap(_C.tl_infinity(canonical(dtype)))


def log1p(x):
    """log(1 + x), accurate for small x: log(u) * x / (u - 1) with u = 1 + x (the rounding of u cancels)."""
    if _number(x):
        return math.log1p(x)
    u = x + 1.0
    return if_then_else(u == 1.0, x, if_then_else(isinf(u), u, log(u) * (x / (u - 1.0))))


def copysign(x, y):
    """|x| with the sign of y (-0.0 counts as negative; a NaN y as positive: the IR has no sign-bit read)."""
    if _number(y):
        return math.copysign(x, y) if _number(x) else (abs(x) * -1.0 if math.copysign(1.0, y) < 0 else abs(x))
    negative = (y < 0) | ((y == 0) & (1.0 / y < 0))  # 1 / -0.0 is -inf
    return if_then_else(negative, abs(x) * -1.0, abs(x))  # -1.0 * 0.0 is -0.0


def max_value(dtype):
    import numpy as np

    name = canonical(dtype)
    if name == "float4_e2m1":
        return cast(name, 6.0)
    if name in ("float32", "float16", "bfloat16", "float64", "float8_e4m3", "float8_e5m2"):
        import ml_dtypes
        finfo = {"bfloat16": ml_dtypes.finfo(ml_dtypes.bfloat16), "float8_e4m3": ml_dtypes.finfo(ml_dtypes.float8_e4m3fn),
                 "float8_e5m2": ml_dtypes.finfo(ml_dtypes.float8_e5m2)}.get(name) or np.finfo(name)
        return cast(name, float(finfo.max))
    return cast(name, int(np.iinfo(name).max))


def min_value(dtype):
    import numpy as np

    name = canonical(dtype)
    if name.startswith(("float", "bfloat")):
        return -max_value(name)
    return cast(name, int(np.iinfo(name).min))


def Cast(dtype, value):  # noqa: N802 - TileLang's spelling
    """T.Cast(dtype, x): convert x (rounding to nearest even for narrower floats)."""
    return cast(dtype, value)


def Select(cond, then_value, else_value):  # noqa: N802 - TIR's spelling
    """T.Select(c, a, b): TIR's select; the same value as T.if_then_else."""
    return if_then_else(cond, then_value, else_value)


def isfinite(x):
    """Neither NaN nor infinite."""
    from ._expr import logical_not, logical_or

    if _number(x):
        return math.isfinite(x)
    return logical_not(logical_or(isnan(x), isinf(x)))


def truncmod(a, b):
    """The remainder of truncdiv (sign of a)."""
    return a - truncdiv(a, b) * b if is_symbolic(a) or is_symbolic(b) else int(math.fmod(a, b))


def bitwise_xor(a, b):
    return a ^ b


def bitwise_and(a, b):
    return a & b


def bitwise_or(a, b):
    return a | b
