"""``T.bfloat16x2`` / ``T.float16x2``: CUDA's two-lane packed types (`__nv_bfloat162`), as TileKernels uses them
(swiglu_forward_and_per_channel_cast_and_transpose: a local array of pairs, ``T.abs2`` / ``T.max2`` on
pairs, then ``T.view`` of the array as scalars). A pair is two scalar expressions; an array of n pairs is
an on-chip buffer of shape (..., n, 2) of the scalar type, which ``T.view(pairs, shape, scalar type)``
sees in CUDA's element order (lane x at 2i, lane y at 2i + 1). The pair functions compute each lane as
CUDA's do (abs and max of 16-bit floats are exact)."""
import tessera.language as TL
from tessera.language import _context as ctx
from tessera.language._dtypes import canonical


class Pair:
    """Two lanes (x, y) of a packed type: Python-level, nothing is emitted until a lane is used."""

    def __init__(self, kind, x, y):
        self.kind, self.x, self.y = kind, x, y

    def __repr__(self):
        return f"{self.kind.__name__}({self.x!r}, {self.y!r})"


class PairType:
    """A packed dtype: ``T.bfloat16x2(a, b)`` builds a pair (each lane rounded to the scalar type); as the
    dtype of ``T.alloc_local`` / ``alloc_fragment`` / ``alloc_shared`` it makes an array of pairs."""

    def __init__(self, name, scalar):
        self.__name__, self.scalar = name, scalar

    def __call__(self, x, y):
        return Pair(self, TL.cast(x, self.scalar), TL.cast(y, self.scalar))

    def __eq__(self, other):
        return isinstance(other, PairType) and other.__name__ == self.__name__

    def __hash__(self):
        return hash(("tilelang-pair", self.__name__))

    def __repr__(self):
        return f"T.{self.__name__}"


bfloat16x2 = PairType("bfloat16x2", "bfloat16")
float16x2 = PairType("float16x2", "float16")


class PairBuffer:
    """An array of pairs: ``buf[i]`` reads a Pair, ``buf[i] = pair`` writes both lanes."""

    def __init__(self, kind, base):
        self.kind, self.base = kind, base

    def _index(self, idx):
        return idx if isinstance(idx, tuple) else (idx,)

    def __getitem__(self, idx):
        i = self._index(idx)
        return Pair(self.kind, self.base[i + (0,)], self.base[i + (1,)])

    def __setitem__(self, idx, pair):
        if not isinstance(pair, Pair):
            raise ctx.error(f"storing into an array of T.{self.kind.__name__}: expected a pair "
                            f"(T.{self.kind.__name__}(x, y), T.abs2, T.max2, ...), got {type(pair).__name__}")
        i = self._index(idx)
        self.base[i + (0,)] = pair.x
        self.base[i + (1,)] = pair.y


def _allocator(alloc):
    def allocate(shape, dtype, *args, **kwargs):
        if not isinstance(dtype, PairType):
            return alloc(shape, dtype, *args, **kwargs)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return PairBuffer(dtype, alloc(shape + (2,), dtype.scalar, *args, **kwargs))

    allocate.__name__, allocate.__doc__ = alloc.__name__, alloc.__doc__
    return allocate


alloc_local = _allocator(TL.alloc_local)
alloc_fragment = _allocator(TL.alloc_fragment)
alloc_shared = _allocator(TL.alloc_shared)


def view(buffer, shape=None, dtype=None, **kwargs):
    """T.view; an array of pairs seen as its scalar type is the (..., n, 2) buffer reshaped."""
    if isinstance(buffer, PairBuffer):
        if dtype is None or isinstance(dtype, PairType) or canonical(dtype) != buffer.kind.scalar:
            raise ctx.not_implemented(f"T.view of an array of T.{buffer.kind.__name__}: only as "
                                      f"{buffer.kind.scalar} (its lanes in order) is supported")
        return TL.view(buffer.base, shape)
    return TL.view(buffer, shape, dtype, **kwargs)


def _lanes(name, fn, *pairs):
    for p in pairs:
        if not isinstance(p, Pair):
            raise ctx.error(f"T.{name}: expected pairs (T.bfloat16x2 / T.float16x2 values), got {type(p).__name__}")
    kind = pairs[0].kind
    return Pair(kind, TL.cast(fn(*(p.x for p in pairs)), kind.scalar), TL.cast(fn(*(p.y for p in pairs)), kind.scalar))


def abs2(a):
    """|a| per lane (CUDA __habs2)."""
    return _lanes("abs2", TL.abs, a)


def max2(a, b):
    """The larger of each lane (CUDA __hmax2)."""
    return _lanes("max2", TL.max, a, b)


def min2(a, b):
    """The smaller of each lane (CUDA __hmin2)."""
    return _lanes("min2", TL.min, a, b)
