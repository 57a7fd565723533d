"""Kernels: ``@T.prim_func`` (traced once into a program), ``T.Tensor`` parameter annotations,
``with T.Kernel(...) as (bx, by)`` and ``@T.macro`` (a helper traced inline at every call)."""
import functools
import inspect
import numbers

from .. import _C
from . import _context as ctx
from ._dtypes import DType, canonical
from ._expr import Buffer, DynamicDim, Expr, as_node
from ._rewrite import rewrite


class Tensor:
    """Parameter annotation: ``A: T.Tensor((M, K), "float16")``. Dims are Python ints or T.dynamic
    symbols. At call time the array must have this dtype and shape; any strides are accepted as long
    as the last dimension is contiguous."""

    def __init__(self, shape, dtype="float32", *args, **kwargs):
        if isinstance(shape, (numbers.Integral, Expr)):
            shape = (shape,)
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self):
        return f"T.Tensor({list(self.shape)}, {self.dtype!r})"



class SharedBuffer(Tensor):
    """Annotation of a shared-buffer argument of a @T.macro (documentation only)."""


class FragmentBuffer(Tensor):
    """Annotation of a fragment-buffer argument of a @T.macro (documentation only)."""


class LocalBuffer(Tensor):
    """Annotation of a local-buffer argument of a @T.macro (documentation only)."""


class ParamInfo:
    """A parameter of a traced program: name, tensor or scalar, dtype and (for tensors) the shape with
    ints for static dims and symbol names for dynamic ones."""

    def __init__(self, name, is_tensor, dtype, shape=()):
        self.name, self.is_tensor, self.dtype, self.shape = name, is_tensor, dtype, tuple(shape)

    def __repr__(self):
        return f"ParamInfo({self.name}, {'tensor' if self.is_tensor else 'scalar'}, {self.dtype}, {list(self.shape)})"


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
    file, line = fn.__code__.co_filename, fn.__code__.co_firstlineno
    anns = _annotations(fn)
    body = rewrite(fn)
    builder = _C.TlBuilder(name or fn.__name__, file, line)
    trace = ctx.Trace(builder)
    ctx.push(trace)
    try:
        args, params = [], []
        for pname in inspect.signature(fn).parameters:
            ann = anns.get(pname)
            builder.set_loc(file, line)
            if isinstance(ann, Tensor):
                nodes, dims = [], []
                for d in ann.shape:
                    if isinstance(d, DynamicDim):
                        nodes.append(trace.symbol(d.name))
                        dims.append(d.name)
                    elif isinstance(d, numbers.Integral) or (isinstance(d, Expr) and d.node.const_int() is not None):
                        nodes.append(as_node(int(d)))
                        dims.append(int(d))
                    else:
                        raise ctx.error(f"parameter '{pname}': dimension {d} must be an int or a T.dynamic symbol")
                builder.set_loc(file, line)
                dtype = canonical(ann.dtype)
                args.append(Buffer(builder.tensor(pname, nodes, dtype)))
                params.append(ParamInfo(pname, True, dtype, dims))
            elif isinstance(ann, (str, DType)):
                dtype = canonical(ann)
                args.append(Expr(builder.scalar(pname, dtype)))
                params.append(ParamInfo(pname, False, dtype))
            else:
                raise ctx.error(f"@T.prim_func '{fn.__name__}': parameter '{pname}' needs an annotation "
                                f"T.Tensor(shape, dtype) or a scalar dtype such as T.float32")
        result = body(*args)
        if result is not None:
            raise ctx.error(f"@T.prim_func '{fn.__name__}' must not return a value")
        program = builder.finish()
    finally:
        ctx.pop()
    return PrimFunc(program, params, fn)


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


class Kernel:
    """``with T.Kernel(gx, gy, threads=128) as (bx, by):`` - a grid of blocks that run in parallel on
    tessera's thread pool; each block runs on one thread (threads= is accepted and recorded)."""

    def __init__(self, *grid, threads=128, is_cpu=False, prelude=None, **_ignored):
        if not grid:
            raise ctx.error("T.Kernel needs at least one grid extent")
        if len(grid) > 3:
            raise ctx.error(f"T.Kernel takes at most 3 grid extents, got {len(grid)}")
        self.grid = grid
        if isinstance(threads, (tuple, list)):
            n = 1
            for x in threads:
                n *= int(x)
            threads = n
        self.threads = int(threads)

    def __enter__(self):
        t = ctx.current("T.Kernel")
        nodes = [as_node(g) for g in self.grid]
        ctx.set_loc()
        block_vars = [Expr(v) for v in t.builder.begin_kernel(nodes, self.threads)]
        t.kernel_depth += 1
        return block_vars[0] if len(block_vars) == 1 else tuple(block_vars)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            t = ctx.current()
            t.kernel_depth -= 1
            t.builder.end_kernel()
        return False


def dynamic(name, dtype="int32"):
    """A dimension bound from the argument shapes at every call; kernels compile once for all sizes."""
    return DynamicDim(name, dtype)


symbolic = dynamic
