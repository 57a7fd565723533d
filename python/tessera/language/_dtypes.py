"""Element types. ``T.float16``, ``T.bfloat16``, ... are strings (so they work wherever a dtype name
does, e.g. ``T.alloc_fragment(shape, T.float32)``) that are also callable: ``T.float32(x)`` casts a
value, ``T.int32(5)`` makes a constant, and as a parameter annotation they declare a scalar."""
from .. import _C


_SHORT_NAMES = {"int": "int32", "uint": "uint32", "float": "float32", "half": "float16", "double": "float64"}


class DType(str):
    """A dtype name that converts values when called. ``T.dtype("float16")`` (TileLang's dtype
    object, also usable as an annotation ``dtype: T.dtype = T.float16``) makes one from any dtype
    spelling; ``.bits``, ``.itemsize`` and ``.as_torch()`` describe it."""

    def __new__(cls, name="float32"):
        if isinstance(name, DType):
            return name
        if not isinstance(name, str):
            name = getattr(name, "name", None) or str(name).replace("torch.", "")
        return super().__new__(cls, _SHORT_NAMES.get(name, name))

    def __eq__(self, other):
        """Equal when both name the same element type (``T.dtype(torch.float8_e4m3fn) ==
        T.float8_e4m3fn``, ``T.float == "float32"``)."""
        mine, theirs = _canonical_or_none(self), _canonical_or_none(other)
        if mine is None or theirs is None:
            return str.__eq__(self, other) if isinstance(other, str) else NotImplemented
        return mine == theirs

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(_canonical_or_none(self) or str.__str__(self))

    def __call__(self, value=0):
        from ._expr import cast

        return cast(self, value)

    @property
    def name(self):
        return str.__str__(self)

    @property
    def bits(self):
        return _BITS[canonical(self)]

    @property
    def itemsize(self):
        return max(1, self.bits // 8)

    bytes = itemsize  # TVM's spelling

    def as_torch(self):
        """The torch dtype of this element type (torch must be installed)."""
        import torch

        name = canonical(self)
        attr = {"float8_e4m3": "float8_e4m3fn"}.get(name, name)
        if not hasattr(torch, attr):
            raise TypeError(f"T.dtype({name!r}).as_torch(): torch has no dtype {attr}")
        return getattr(torch, attr)


def _canonical_or_none(dtype):
    """The canonical name of a dtype spelling (a name, a DType, a torch / numpy dtype), or None when
    it names no element type of the tile language."""
    try:  # probing attributes may raise: the tilelang alias's stubs of unsupported dtypes raise on any use
        if not isinstance(dtype, str) and not hasattr(dtype, "is_floating_point") and not hasattr(dtype, "kind"):
            return None
        return canonical(dtype)
    except Exception:  # noqa: BLE001 - an unknown name compares by its spelling
        return None


def canonical(dtype) -> str:
    """The canonical name of a dtype given as a name or alias ("float" -> "float32")."""
    if dtype is None:
        raise TypeError("dtype must not be None")
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:  # numpy / ml_dtypes / torch dtypes
        name = str(dtype).replace("torch.", "")
    return _C.tl_dtype_name(str(name))


_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
          "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2", "float4_e2m1"]
for _n in _NAMES:
    globals()[_n] = DType(_n)
float8_e4m3fn = DType("float8_e4m3")
# A global float4 tensor is packed, two codes per byte (element 2i in the low nibble): an int8 / uint8 /
# torch.float4_e2m1fn_x2 tensor whose last dimension is half the declared one (docs/tl.md).
float4_e2m1fn = DType("float4_e2m1")
half = DType("float16")
float = DType("float32")  # noqa: A001 - TileLang spells it this way too
double = DType("float64")
int = DType("int32")  # noqa: A001 - TileLang's T.int / T.uint
uint = DType("uint32")

_BITS = {"bool": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32,
         "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "float8_e4m3": 8,
         "float8_e5m2": 8, "float4_e2m1": 4}
dtype = DType  # TileLang's T.dtype: the dtype class, callable on any dtype spelling
# tf32 operands: the CPU GEMM reads them as full float32 (TileLang truncates the mantissa to 10 bits)
tfloat32 = DType("float32")

FLOAT_TYPES = {"float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2", "float4_e2m1"}
