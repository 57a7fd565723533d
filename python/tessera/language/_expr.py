"""Symbolic values of a traced kernel: expressions, dynamic dimensions, buffers and buffer elements.

Python numbers mix freely with them (``bx * 128 + i``); integers become int32 constants (int64 when
large), floats float32, ``True``/``False`` bool. Constant arithmetic folds, so a tile size computed
from Python values stays a plain number.
"""
import numbers

from .. import _C
from . import _context as ctx


def as_node(x):
    """The IR node of a symbolic value or Python number."""
    if isinstance(x, Expr):
        return x.node
    if isinstance(x, bool):
        ctx.set_loc()
        return _C.tl_int(int(x), "bool")
    if isinstance(x, numbers.Integral):
        ctx.set_loc()
        v = int(x)
        return _C.tl_int(v, "int32" if -2**31 <= v < 2**31 else "int64")
    if isinstance(x, numbers.Real):
        ctx.set_loc()
        return _C.tl_float(float(x), "float32")
    if isinstance(x, Buffer):
        raise ctx.error(f"buffer '{x.name}' is not a value; index it (e.g. {x.name}[i, j])")
    raise ctx.error(f"expected a number or a symbolic value, got {type(x).__name__}")


def is_symbolic(x):
    return isinstance(x, Expr)


def wrap(node):
    return Expr(node)


def deferred_outside_trace(a, *rest):
    """True when no program is being traced and an operand is a T.dynamic symbol (or built from one):
    the operation is then recorded as a Deferred and built inside the kernel that uses it. Also true
    when an operand is an expression of a per-thread kernel's thread index (_simt.py): it is rebuilt
    wherever it is used, with the thread loop open there."""
    operands = (a,) + rest
    if not _building and any(getattr(x, "thread_lazy", False) or _undeclared_in_kernel(x) for x in operands):
        return True
    return ctx.active() is None and any(isinstance(x, (DynamicDim, Deferred)) for x in operands)


def _thread_dependent_ref(x):
    if not isinstance(x, BufferRef) or _building:
        return False
    t = ctx.active()
    if t is None or t.simt is None:
        return False
    from ._simt import is_thread_dependent

    return is_thread_dependent(x)


def _undeclared_in_kernel(x):
    """A T.dynamic symbol no tensor declares, used inside a T.Kernel (``T.assume(stride % 8 == 0)`` on a
    stride symbol): deferred, so hints that never build it work; building it raises the builder's error."""
    if not isinstance(x, DynamicDim):
        return False
    t = ctx.active()
    return t is not None and t.kernel_depth > 0 and x.name not in t.symbols


def _binary(op, a, b):
    if deferred_outside_trace(a, b):
        return Deferred(lambda: _binary(op, a, b))
    na, nb = as_node(a), as_node(b)
    ctx.set_loc()
    return wrap(_C.tl_binary(op, na, nb))


def _compare(op, a, b):
    if deferred_outside_trace(a, b):
        return Deferred(lambda: _compare(op, a, b))
    na, nb = as_node(a), as_node(b)
    ctx.set_loc()
    return wrap(_C.tl_compare(op, na, nb))


def _is_bool(x):
    return isinstance(x, bool) or (isinstance(x, Expr) and x.dtype == "bool")


def cast(dtype, value):
    from ._dtypes import canonical

    if deferred_outside_trace(value) or _thread_dependent_ref(value):
        # a cast of a thread-index expression (or of a load at one) is rebuilt where it is used too, so
        # an expression holding it (a T.Select on a per-thread condition) does not keep an old thread loop's index
        return Deferred(lambda: cast(dtype, value))
    node = as_node(value)
    ctx.set_loc()
    return wrap(_C.tl_cast(canonical(dtype), node))


class Expr:
    """A symbolic scalar: loop variables, block indices, loads, arithmetic on them."""

    def __init__(self, node):
        self._node = node

    @property
    def node(self):
        return self._node

    @property
    def dtype(self):
        return self.node.dtype

    def astype(self, dtype):
        return cast(dtype, self)

    # arithmetic
    def __add__(self, o): return _binary("+", self, o)
    def __radd__(self, o): return _binary("+", o, self)
    def __sub__(self, o): return _binary("-", self, o)
    def __rsub__(self, o): return _binary("-", o, self)
    def __mul__(self, o): return _binary("*", self, o)
    def __rmul__(self, o): return _binary("*", o, self)
    def __truediv__(self, o): return _binary("/", self, o)
    def __rtruediv__(self, o): return _binary("/", o, self)
    def __floordiv__(self, o): return _binary("//", self, o)
    def __rfloordiv__(self, o): return _binary("//", o, self)
    def __mod__(self, o): return _binary("%", self, o)
    def __rmod__(self, o): return _binary("%", o, self)
    def __lshift__(self, o): return _binary("<<", self, o)
    def __rlshift__(self, o): return _binary("<<", o, self)
    def __rshift__(self, o): return _binary(">>", self, o)
    def __rrshift__(self, o): return _binary(">>", o, self)

    def __pow__(self, o):
        from ._math import call
        return call("pow", self, o)

    def __rpow__(self, o):
        from ._math import call
        return call("pow", o, self)

    def __neg__(self): return _binary("-", 0.0 if self.dtype.startswith(("float", "bfloat")) else 0, self)
    def __pos__(self): return self

    def __abs__(self):
        from ._math import call
        return call("abs", self)

    # bit operations; on bool values they are the logical and / or / not
    def __and__(self, o):
        if _is_bool(self) and _is_bool(o):
            return logical_and(self, o)
        return _binary("&", self, o)

    def __rand__(self, o): return self.__and__(o) if _is_bool(o) else _binary("&", o, self)

    def __or__(self, o):
        if _is_bool(self) and _is_bool(o):
            return logical_or(self, o)
        return _binary("|", self, o)

    def __ror__(self, o): return self.__or__(o) if _is_bool(o) else _binary("|", o, self)
    def __xor__(self, o): return _binary("^", self, o)
    def __rxor__(self, o): return _binary("^", o, self)

    def __invert__(self):
        if self.dtype == "bool":
            return logical_not(self)
        return _binary("^", self, -1)

    # comparisons build expressions (so == / != too); Expr stays hashable by identity
    def __lt__(self, o): return _compare("<", self, o)
    def __le__(self, o): return _compare("<=", self, o)
    def __gt__(self, o): return _compare(">", self, o)
    def __ge__(self, o): return _compare(">=", self, o)
    def __eq__(self, o): return _compare("==", self, o)  # noqa: PLE0307
    def __ne__(self, o): return _compare("!=", self, o)
    __hash__ = object.__hash__

    # conversions to Python values work for constants only
    def _const(self, what):
        v = self.node.const_value()
        if v is None:
            raise ctx.error(
                f"a symbolic value ({self}) is used as a Python {what}; the kernel decides this at run time, so "
                f"write it with T.if_then_else / an `if` statement inside the kernel, T.serial for loops, or "
                f"compute it from Python values")
        return v

    def __bool__(self): return bool(self._const("bool (if/while/and/or on it)"))
    def __int__(self): return int(self._const("int"))
    def __index__(self): return int(self._const("int (range(), list index, ...)"))
    def __float__(self): return float(self._const("float"))
    def __str__(self): return str(self.node)
    def __repr__(self): return f"T.Expr({self.node}: {self.dtype})"


def logical_and(a, b):
    na, nb = as_node(a), as_node(b)
    ctx.set_loc()
    return wrap(_C.tl_and(na, nb))


def logical_or(a, b):
    na, nb = as_node(a), as_node(b)
    ctx.set_loc()
    return wrap(_C.tl_or(na, nb))


def logical_not(a):
    na = as_node(a)
    ctx.set_loc()
    return wrap(_C.tl_not(na))


class DynamicDim(Expr):
    """``T.dynamic("M")``: a dimension bound from the argument shapes at every call (int32)."""

    def __init__(self, name, dtype="int32"):
        if dtype != "int32":
            raise ctx.not_implemented(f"T.dynamic('{name}'): only int32 dynamic dimensions are supported")
        super().__init__(None)
        self.name = str(name)

    @property
    def node(self):
        return ctx.current(f"T.dynamic('{self.name}')").symbol(self.name)

    def __repr__(self):
        return f"T.dynamic({self.name!r})"


_building = 0  # Deferred expressions being rebuilt


class Deferred(Expr):
    """Arithmetic on T.dynamic symbols outside a kernel (``blocks = T.ceildiv(num_tokens, 128)`` in a
    factory, before its @T.prim_func): rebuilt in the program that uses it."""

    def __init__(self, build):
        super().__init__(None)
        self._build = build
        self.thread_lazy = ctx.active() is not None  # inside a trace only thread-index expressions defer

    @property
    def node(self):
        global _building
        ctx.current("an expression of T.dynamic symbols")
        _building += 1  # the operations of the rebuild build nodes instead of deferring again
        try:
            return self._build().node
        finally:
            _building -= 1

    @property
    def dtype(self):
        return self.node.dtype if ctx.active() is not None else "int32"

    def __repr__(self):
        return "T.Expr(<deferred expression of T.dynamic symbols>)"


class Buffer:
    """A tensor parameter or an on-chip buffer. ``buf[i, j]`` is an element (a value, or the corner of
    a tile in T.copy); ``buf[a:b, :]`` is a tile; ``buf[i, j] = v`` stores."""

    def __init__(self, handle):
        self.handle = handle
        self.name = handle.name
        self.dtype = handle.dtype
        self.scope = handle.scope
        self.shape = tuple(_dim_value(d) for d in handle.shape)
        self.ndim = len(self.shape)

    def __getitem__(self, idx):
        self._check_simt()
        return BufferRef(self, self._indices(idx))

    def __setitem__(self, idx, value):
        self._check_simt()
        indices = self._indices(idx)
        if any(isinstance(i, slice) for i in indices):
            raise ctx.error(f"assigning to a slice of '{self.name}' is not supported; use T.fill or a T.Parallel loop")
        nodes = [as_node(i) for i in indices]
        v = as_node(value)
        self._note_shared(write=True)
        ctx.set_loc()
        ctx.current("storing to a buffer").builder.store(self.handle, nodes, v)

    def _indices(self, idx):
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self.ndim:
            raise ctx.error(f"buffer '{self.name}' has {self.ndim} dimension(s) {list(self.shape)}, indexed with {len(idx)}")
        for i in idx:
            if isinstance(i, slice) and i.step not in (None, 1):
                raise ctx.not_implemented(f"'{self.name}': slices with a step are not supported")
        return list(idx)

    def region(self):
        self._check_simt()
        return _C.tl_whole(self.handle)

    def _note_shared(self, write):
        if self.scope.startswith("shared"):
            t = ctx.active()
            if t is not None and t.simt is not None:
                t.simt.note_shared(self, write)

    def _check_simt(self):
        if self.scope == "local":
            t = ctx.active()
            if t is not None and t.simt is not None:
                t.simt.check_local(self)

    @property
    def data(self):
        """The storage of this tensor, for a view: ``T.Tensor(shape, dtype, A.data)``."""
        from ._views import BufferData

        return BufferData(self)

    def __repr__(self):
        return f"T.Buffer({self.name}, {list(self.shape)}, {self.dtype}, scope={self.scope})"


def _dim_value(node):
    v = node.const_int()
    return v if v is not None else Expr(node)


class BufferRef(Expr):
    """``buf[...]``: a value when every index is a scalar, a tile operand for T.copy & co."""

    def __init__(self, buffer, indices):
        super().__init__(None)
        self.buffer = buffer
        self.indices = indices

    @property
    def node(self):
        if any(isinstance(i, slice) for i in self.indices):
            raise ctx.error(f"a slice of '{self.buffer.name}' is a tile, not a value; use it in T.copy / T.gemm / "
                            f"T.atomic_add, or index single elements")
        nodes = [as_node(i) for i in self.indices]
        self.buffer._note_shared(write=False)
        ctx.set_loc()
        return _C.tl_load(self.buffer.handle, nodes)

    @property
    def dtype(self):
        return self.buffer.dtype

    def region_bounds(self):
        """(mins, extents, sliced): per dimension the first index and the count a slice or an index covers."""
        mins, extents, sliced = [], [], False
        for d, i in enumerate(self.indices):
            if isinstance(i, slice):
                sliced = True
                start = 0 if i.start is None else i.start
                stop = self.buffer.shape[d] if i.stop is None else i.stop
                mins.append(as_node(start))
                extents.append(as_node(stop - start))
            else:
                mins.append(as_node(i))
                extents.append(as_node(1))
        return mins, extents, sliced

    def region(self):
        mins, extents, sliced = self.region_bounds()
        ctx.set_loc()
        return _C.tl_region(self.buffer.handle, mins, extents if sliced else None)


class VarBuffer(Expr):
    """``T.alloc_var(dtype)``: a mutable scalar. Reading gives its current value; ``x = v`` (in the
    kernel), ``x += v`` and ``x[0] = v`` store."""

    def __init__(self, buffer):
        super().__init__(None)
        self.buffer = buffer

    @property
    def node(self):
        return self.buffer[0].node

    @property
    def dtype(self):
        return self.buffer.dtype

    def store(self, value):
        self.buffer[0] = value

    def __getitem__(self, idx):
        return self.buffer[idx]

    def __setitem__(self, idx, value):
        self.buffer[idx] = value

    def _update(self, op, other):
        self.store(_binary(op, self, other))
        return self

    def __iadd__(self, o): return self._update("+", o)
    def __isub__(self, o): return self._update("-", o)
    def __imul__(self, o): return self._update("*", o)
    def __itruediv__(self, o): return self._update("/", o)


def region_of(x, what):
    """A tile-op operand: a whole buffer, a slice or an element (corner)."""
    if isinstance(x, Buffer):
        return x.region()
    if isinstance(x, VarBuffer):
        return x.buffer.region()
    if isinstance(x, BufferRef):
        return x.region()
    raise ctx.error(f"{what} must be a buffer, a slice of one or an element of one, got {type(x).__name__}")
