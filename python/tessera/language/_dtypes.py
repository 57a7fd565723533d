"""Element types. ``T.float16``, ``T.bfloat16``, ... are strings (so they work wherever a dtype name
does, e.g. ``T.alloc_fragment(shape, T.float32)``) that are also callable: ``T.float32(x)`` casts a
value, ``T.int32(5)`` makes a constant, and as a parameter annotation they declare a scalar."""
from .. import _C


class DType(str):
    """A dtype name that converts values when called."""

    def __call__(self, value=0):
        from ._expr import cast

        return cast(self, value)


def canonical(dtype) -> str:
    """The canonical name of a dtype given as a name or alias ("float" -> "float32")."""
    if dtype is None:
        raise TypeError("dtype must not be None")
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:  # numpy / ml_dtypes / torch dtypes
        name = str(dtype).replace("torch.", "")
    return _C.tl_dtype_name(str(name))


_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
          "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2"]
for _n in _NAMES:
    globals()[_n] = DType(_n)
float8_e4m3fn = DType("float8_e4m3")
half = DType("float16")
float = DType("float32")  # noqa: A001 - TileLang spells it this way too
double = DType("float64")

FLOAT_TYPES = {"float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2"}
