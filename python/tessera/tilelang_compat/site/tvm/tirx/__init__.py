"""``tvm.tirx`` scalar helpers on tessera.language expressions: const, reinterpret, Cast, Select."""
from tessera.language import Cast, if_then_else
from tessera.language import reinterpret as _reinterpret
from tessera.language._expr import Expr as PrimExpr  # noqa: F401 - used in annotations
from tessera.language._expr import cast as _cast


def const(value, dtype="int32"):
    """A constant of the given dtype."""
    return _cast(dtype, value)


def reinterpret(dtype, value):
    """The bits of value read as dtype (TVM's argument order)."""
    return _reinterpret(dtype, value)


Select = if_then_else

__all__ = ["Cast", "PrimExpr", "Select", "const", "reinterpret"]
