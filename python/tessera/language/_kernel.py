"""Kernels: ``@T.prim_func`` (traced once into a program), ``T.Tensor`` parameter annotations,
``with T.Kernel(...) as (bx, by)`` and ``@T.macro`` (a helper traced inline at every call)."""
import functools
import inspect
import numbers

from .. import _C
from . import _context as ctx
from ._dim_formulas import formula_symbols
from ._dtypes import DType, canonical
from ._expr import Buffer, DynamicDim, Expr, as_node
from ._rewrite import rewrite
from ._simt import trace_per_thread_if_needed


class Tensor:
    """Parameter annotation: ``A: T.Tensor((M, K), "float16")``. Dims are Python ints or T.dynamic
    symbols. At call time the array must have this dtype and shape; any strides are accepted as long
    as the last dimension is contiguous."""

    def __new__(cls, shape=(), dtype="float32", data=None, *args, **kwargs):
        if data is None:
            return super().__new__(cls)
        # T.Tensor(shape, dtype, A.data) inside a kernel: A seen with another shape
        from ._views import BufferData, BufferView

        if not isinstance(data, BufferData):
            raise ctx.error(f"T.Tensor(shape, dtype, data): data must be a tensor's .data, got {type(data).__name__}")
        if isinstance(shape, (numbers.Integral, Expr)):
            shape = (shape,)
        return BufferView(data.buffer, shape, dtype)

    def __init__(self, shape, dtype="float32", data=None, *args, **kwargs):
        if isinstance(shape, (numbers.Integral, Expr)):
            shape = (shape,)
        self.shape = tuple(shape)
        self.dtype = dtype

    def __class_getitem__(cls, item):
        """``T.Tensor[(M, N), dtype]`` / ``T.Tensor[[M, N], dtype]``: the subscript spelling."""
        if not isinstance(item, tuple) or len(item) != 2:
            raise ctx.error(f"T.Tensor[...] expects [shape, dtype], got {item!r}")
        return cls(item[0], item[1])

    def __repr__(self):
        return f"T.Tensor({list(self.shape)}, {self.dtype!r})"



class StridedTensor(Tensor):
    """``T.StridedTensor[(M, N), (stride, 1), dtype]``: a parameter with explicit strides. Every tensor
    parameter takes its strides from the argument at call time, so this is T.Tensor; the last stride
    must be 1 (a contiguous last dimension)."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, shape, strides=None, dtype="float32", *args, **kwargs):
        if strides is not None:
            last = list(strides)[-1] if len(strides) else 1
            if not (isinstance(last, numbers.Integral) and last == 1):
                raise ctx.not_implemented(f"T.StridedTensor: the last stride must be 1, got {last}")
        super().__init__(shape, dtype)

    def __class_getitem__(cls, item):
        if not isinstance(item, tuple) or len(item) != 3:
            raise ctx.error(f"T.StridedTensor[...] expects [shape, strides, dtype], got {item!r}")
        return cls(item[0], item[1], item[2])


class SharedBuffer(Tensor):
    """Annotation of a shared-buffer argument of a @T.macro (documentation only)."""


class FragmentBuffer(Tensor):
    """Annotation of a fragment-buffer argument of a @T.macro (documentation only)."""


class LocalBuffer(Tensor):
    """Annotation of a local-buffer argument of a @T.macro (documentation only)."""


class ParamInfo:
    """A parameter of a traced program: name, tensor or scalar, dtype and (for tensors) the shape with
    ints for static dims and symbol names for dynamic ones (a dim given as an expression of symbols
    gets a symbol of its own, with its formula in ``formulas``). ``role`` is "input" (an annotated
    parameter), "output" (an eager ``T.empty``) or "scratch" (``T.alloc_global``: allocated by the
    kernel object at every call, never seen by the caller)."""

    def __init__(self, name, is_tensor, dtype, shape=(), role="input"):
        self.name, self.is_tensor, self.dtype, self.shape = name, is_tensor, dtype, tuple(shape)
        self.role = role
        self.formulas = {}  # symbol name in shape -> (dim, formula over other symbols): _dim_formulas.py

    def __repr__(self):
        return f"ParamInfo({self.name}, {'tensor' if self.is_tensor else 'scalar'}, {self.dtype}, {list(self.shape)})"


def _locate(trace, loc):
    if loc is None:
        ctx.set_loc()
    else:
        trace.builder.set_loc(*loc)


def declare_tensor(trace, name, shape, dtype, role="input", what=None, loc=None):
    """Declares a global tensor parameter (dims: ints or T.dynamic symbols) and returns its Buffer.
    loc: the (file, line) its errors name (default: the kernel author's current line)."""
    what = what or f"parameter '{name}'"
    if isinstance(shape, (numbers.Integral, Expr)):
        shape = (shape,)
    nodes, dims, formulas = [], [], {}
    for k, d in enumerate(shape):
        if isinstance(d, DynamicDim):
            nodes.append(trace.symbol(d.name))
            dims.append(d.name)
        elif isinstance(d, numbers.Integral) or (isinstance(d, Expr) and d.node.const_int() is not None):
            nodes.append(as_node(int(d)))
            dims.append(int(d))
        elif isinstance(d, Expr):
            hidden, formula = _formula_dim(trace, name, k, d, what)
            nodes.append(trace.symbol(hidden))
            dims.append(hidden)
            formulas[hidden] = (k, formula)
        else:
            raise ctx.error(f"{what}: dimension {d} must be an int, a T.dynamic symbol or an expression of them")
    dtype = canonical(dtype)
    _locate(trace, loc)
    buf = Buffer(trace.builder.tensor(name, nodes, dtype))
    info = ParamInfo(name, True, dtype, dims, role)
    info.formulas = formulas
    trace.params.append(info)
    return buf


def _formula_dim(trace, name, k, d, what):
    """(symbol name, formula) for dimension k of tensor `name` given as an expression of symbols
    (see _dim_formulas.py)."""
    formula = str(d.node)
    try:
        formula_symbols(formula)
    except (SyntaxError, ValueError) as e:
        raise ctx.not_implemented(f"{what}: dimension {k} = {formula}: {e}") from None
    hidden = f"{name}_dim{k}"
    if hidden in trace.symbols:
        raise ctx.error(f"{what}: the name '{hidden}' of its dimension {k} is already a T.dynamic symbol")
    return hidden, formula


def declare_scalar(trace, name, dtype, loc=None):
    dtype = canonical(dtype)
    _locate(trace, loc)
    value = Expr(trace.builder.scalar(name, dtype))
    trace.params.append(ParamInfo(name, False, dtype))
    return value


class PrimFunc:
    """A traced tile-language program (what @T.prim_func returns)."""

    def __init__(self, program, params, fn):
        self.program = program
        self.params = params
        self.name = program.name
        self.fn = fn

    def script(self):
        """The program as TileLang-like text."""
        return str(self.program)

    def __str__(self):
        return self.script()

    def __call__(self, *args, **kwargs):
        raise ctx.error(f"@T.prim_func '{self.name}' is a program, not a function: compile it with tessera.jit / "
                        f"tessera.tl.compile and call the kernel")


def _annotations(fn):
    anns = dict(getattr(fn, "__annotations__", {}))
    scope = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:
            pass
    for k, v in anns.items():
        if isinstance(v, str) and not isinstance(v, DType):  # `from __future__ import annotations`, or a dtype name
            try:
                anns[k] = eval(v, scope)  # noqa: S307 - the author's own annotation
            except Exception:  # noqa: BLE001 - not an expression: a dtype name like "float32"
                anns[k] = v
    return anns


def _trace(fn, name):
    """Traces fn (again as a per-thread kernel where it needs one: _simt.py)."""
    return trace_per_thread_if_needed(lambda simt, plan: _trace_once(fn, name, simt, plan),
                                      f"@T.prim_func '{fn.__name__}'")


def _trace_once(fn, name, simt, plan=None):
    file, line = fn.__code__.co_filename, fn.__code__.co_firstlineno
    anns = _annotations(fn)
    body = rewrite(fn)
    builder = _C.TlBuilder(name or fn.__name__, file, line)
    trace = ctx.Trace(builder)
    trace.simt_mode = simt
    trace.simt_plan = plan
    ctx.push(trace)
    try:
        args = []
        for pname in inspect.signature(fn).parameters:
            ann = anns.get(pname)
            builder.set_loc(file, line)
            if isinstance(ann, Tensor):
                args.append(declare_tensor(trace, pname, ann.shape, ann.dtype, loc=(file, line)))
            elif isinstance(ann, (str, DType)):
                args.append(declare_scalar(trace, pname, ann, loc=(file, line)))
            else:
                raise ctx.error(f"@T.prim_func '{fn.__name__}': parameter '{pname}' needs an annotation "
                                f"T.Tensor(shape, dtype) or a scalar dtype such as T.float32")
        result = body(*args)
        if result is not None:
            raise ctx.error(f"@T.prim_func '{fn.__name__}' must not return a value")
        program = builder.finish()
    finally:
        ctx.pop()
    return PrimFunc(program, trace.params, fn)


def prim_func(fn=None, *, name=None, **_ignored):
    """Traces fn once into a tile-language program (errors point at fn's source lines)."""
    if fn is None:
        return lambda f: prim_func(f, name=name)
    return _trace(fn, name)


def macro(fn=None, **_ignored):
    """A helper whose body is traced inline wherever it is called from a kernel (like TileLang's
    T.macro). Python arguments (constants, buffers, expressions) are passed as they are."""
    if fn is None:
        return macro
    rewritten = []

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not rewritten:
            rewritten.append(rewrite(fn))
        return rewritten[0](*args, **kwargs)

    call.__tl_macro__ = True
    return call


class BlockIndex(Expr):
    """The block index of a one-dimensional grid. It also unpacks as a 1-tuple, so both
    ``as bx`` and ``as (bx,)`` work for ``T.Kernel(n)``."""

    def __iter__(self):
        yield Expr(self.node)


class Kernel:
    """``with T.Kernel(gx, gy, threads=128) as (bx, by):`` - a grid of blocks that run in parallel on
    tessera's thread pool; each block runs on one thread (threads= is accepted and recorded)."""

    def __init__(self, *grid, threads=128, is_cpu=False, prelude=None, **_ignored):
        if not grid:
            raise ctx.error("T.Kernel needs at least one grid extent")
        if len(grid) > 3:
            raise ctx.error(f"T.Kernel takes at most 3 grid extents, got {len(grid)}")
        self.grid = grid
        self.thread_extents = tuple(int(x) for x in threads) if isinstance(threads, (tuple, list)) else (int(threads),)
        n = 1
        for x in self.thread_extents:
            n *= x
        self.threads = n

    def __enter__(self):
        t = ctx.current("T.Kernel")
        nodes = [as_node(g) for g in self.grid]
        ctx.set_loc()
        block_vars = [Expr(v) for v in t.builder.begin_kernel(nodes, self.threads)]
        t.kernel_depth += 1
        t.kernel_threads = self.thread_extents
        t.kernel_grid, t.kernel_block_vars = self.grid, [v.node for v in block_vars]  # for T.sync_grid()
        t.last_statement = False  # set by the rewriter before the body's last `if` (T.thread_return)
        return BlockIndex(block_vars[0].node) if len(block_vars) == 1 else tuple(block_vars)

    def __exit__(self, exc_type, exc, tb):
        from ._threads import KernelReturn

        ended = exc_type is not None and issubclass(exc_type, KernelReturn)  # T.thread_return(): the rest is dead
        if exc_type is None or ended:
            t = ctx.current()
            if t.simt is not None:
                t.simt.close(t)
                t.simt = None
            t.kernel_depth -= 1
            t.builder.end_kernel()
        return ended


def dynamic(name, dtype="int32"):
    """A dimension bound from the argument shapes at every call; kernels compile once for all sizes.
    ``T.dynamic("M, N")`` (or "M N") declares several at once and returns a tuple."""
    names = [n for n in str(name).replace(",", " ").split() if n]
    if len(names) > 1:
        return tuple(DynamicDim(n, dtype) for n in names)
    return DynamicDim(name, dtype)


def alloc_global(shape, dtype):
    """A global scratch tensor of the program (TileLang's T.alloc_global), e.g. the partial results a
    second T.Kernel grid combines. The kernel object allocates it at every call; declare it before the
    first T.Kernel."""
    t = ctx.current("T.alloc_global")
    name = t.take_name("global")
    return declare_tensor(t, name, shape, dtype, role="scratch", what=f"T.alloc_global '{name}'")


symbolic = dynamic
