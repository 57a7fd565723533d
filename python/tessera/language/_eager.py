"""Eager-style kernels: TileLang's ``@jit`` functions that are the kernel themselves.

    @tessera.jit
    def add(A, B, block):
        M, N = T.const("M, N")          # sizes taken from the arguments' shapes
        A: T.Tensor((M, N), T.float32)  # declares parameter A
        B: T.Tensor((M, N), T.float32)
        C = T.empty((M, N), T.float32)  # an output the call allocates and returns
        with T.Kernel(...): ...
        return C

A call ``add(a, b, block=64)`` traces the body twice. The first trace ("discover") runs with every
``T.const`` as a symbol, up to the annotation of the last tensor parameter, to learn which argument
dimension gives each constant. The second ("build") runs with the constants as Python ints and makes
the program; its parameters are the annotated tensors in the order their annotations ran, then the
``T.empty`` outputs. Parameters that are not annotated in the body are compile-time Python values.
"""
import ast
import inspect
import textwrap

from .. import _C
from . import _context as ctx
from ._dtypes import DType
from ._expr import DynamicDim
from ._kernel import PrimFunc, Tensor, declare_scalar, declare_tensor
from ._rewrite import rewrite
from ._simt import trace_per_thread_if_needed


class DiscoveryDone(Exception):
    """Raised inside a discover trace once every tensor parameter is annotated (stops the trace)."""


class EagerTrace:
    """Eager-mode state of one trace."""

    def __init__(self, mode, tensor_params, consts):
        self.mode = mode  # "discover" or "build"
        self.tensor_params = list(tensor_params)
        self.consts = dict(consts)  # build: name -> int
        self.const_names = set()  # discover: every T.const name seen
        self.annotations = {}  # discover: parameter name -> Tensor annotation
        self.declared = []  # parameter names in the order their annotations ran
        self.outputs = {}  # id(Buffer) -> parameter name of a T.empty output


def _eager(what):
    t = ctx.active()
    if t is None or t.eager is None:
        raise ctx.error(f"{what} can only be used in the body of an eager-style @jit function (one that "
                        f"annotates its tensor parameters in the body and returns its T.empty outputs)")
    return t, t.eager


def _split_names(names):
    return [n for n in str(names).replace(",", " ").split() if n]


def const(names, dtype="int32"):
    """``M, N = T.const("M, N")``: sizes that the call takes from its tensor arguments' shapes (or from
    ``kernel.compile(M=..., N=...)``). The kernel is compiled for those sizes."""
    t, e = _eager("T.const")
    values = []
    for name in _split_names(names):
        if e.mode == "discover":
            e.const_names.add(name)
            values.append(DynamicDim(name))
        elif name in e.consts:
            values.append(e.consts[name])
        else:
            raise ctx.error(f"T.const('{name}'): no value: pass a tensor whose annotated shape has {name} as a "
                            f"dimension, or {name}=... to .compile()")
    return values[0] if len(values) == 1 else tuple(values)


class _Pending:
    """What a name refers to in a discover trace before the build trace makes the real buffer."""

    def __init__(self, name):
        self.name = name

    def __getattr__(self, attr):
        raise DiscoveryDone()

    def __getitem__(self, idx):
        raise DiscoveryDone()


def empty(*shape, dtype="float32"):
    """``C = T.empty((M, N), dtype)``: an output tensor that the call allocates and returns."""
    if len(shape) == 2 and isinstance(shape[0], (tuple, list)) and isinstance(shape[1], str):
        shape, dtype = shape
    elif len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    t, e = _eager("T.empty")
    name = t.take_name(f"out{len(e.outputs)}")
    if e.mode == "discover":
        return _Pending(name)
    buf = declare_tensor(t, name, shape, dtype, role="output", what=f"T.empty '{name}'")
    e.outputs[id(buf)] = name
    return buf


def declare(name, annotation, current):
    """``name: annotation`` on a parameter inside a kernel body (see _rewrite.visit_AnnAssign)."""
    t = ctx.active()
    e = t.eager if t is not None else None
    if e is None or name not in e.tensor_params:
        return current
    if name in e.declared:
        raise ctx.error(f"parameter '{name}' is annotated twice")
    e.declared.append(name)
    if e.mode == "discover":
        e.annotations[name] = annotation
        if len(e.declared) == len(e.tensor_params):
            raise DiscoveryDone()
        return _Pending(name)
    if isinstance(annotation, Tensor):
        return declare_tensor(t, name, annotation.shape, annotation.dtype)
    if isinstance(annotation, (str, DType)):
        return declare_scalar(t, name, annotation)
    raise ctx.error(f"parameter '{name}': the annotation must be T.Tensor(shape, dtype) or a scalar dtype, got "
                    f"{annotation!r}")


# ---------------- source analysis ----------------

def _function_def(fn):
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _is_prim_func_decorator(d):
    d = d.func if isinstance(d, ast.Call) else d
    return (isinstance(d, ast.Attribute) and d.attr == "prim_func") or (isinstance(d, ast.Name) and d.id == "prim_func")


def annotated_params(fn):
    """The parameters annotated in fn's body (``A: T.Tensor(...)``), in signature order; None when fn
    is a factory returning a @T.prim_func (TileLang's lazy style)."""
    fdef = _function_def(fn)
    if fdef is None:
        return None
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs]
    annotated, eager_calls = set(), False
    for node in ast.walk(fdef):
        if node is fdef:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_is_prim_func_decorator,
                                                                                node.decorator_list)):
            return None
        if isinstance(node, ast.AnnAssign) and node.value is None and isinstance(node.target, ast.Name):
            annotated.add(node.target.id)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("const", "empty")
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id in ("torch", "np", "numpy"))):
            eager_calls = True  # T.const / T.empty (not torch.empty / np.empty in a factory)
    found = [p for p in params if p in annotated]
    return found if found or eager_calls else None


# ---------------- the two traces ----------------

def _run(fn, mode, tensor_params, statics, consts):
    """One eager trace (again as a per-thread kernel where it needs one: _simt.py)."""
    return trace_per_thread_if_needed(lambda simt, plan: _run_once(fn, mode, tensor_params, statics, consts, simt, plan),
                                      f"@jit '{fn.__name__}'")


def _run_once(fn, mode, tensor_params, statics, consts, simt, plan):
    file, line = fn.__code__.co_filename, fn.__code__.co_firstlineno
    body = rewrite(fn)
    builder = _C.TlBuilder(fn.__name__, file, line)
    trace = ctx.Trace(builder)
    trace.eager = EagerTrace(mode, tensor_params, consts)
    trace.simt_mode = simt
    trace.simt_plan = plan
    ctx.push(trace)
    try:
        kwargs = dict(statics)
        for name in tensor_params:
            kwargs[name] = _Pending(name)
        try:
            result = body(**kwargs)
        except DiscoveryDone:
            if mode != "discover":
                raise
            return trace, None, None
        if mode == "discover":
            missing = [p for p in tensor_params if p not in trace.eager.declared]
            raise ctx.error(f"@jit '{fn.__name__}': parameters {missing} are annotated in the body but their "
                            f"annotations never ran")
        program = builder.finish()
    finally:
        ctx.pop()
    return trace, program, result


def discover(fn, tensor_params, statics):
    """[(const name, tensor parameter, dimension)]: where each T.const takes its value from, and the
    annotated dtype of each tensor parameter."""
    trace, _, _ = _run(fn, "discover", tensor_params, statics, {})
    e = trace.eager
    plan, dtypes = [], {}
    for pname in tensor_params:
        ann = e.annotations.get(pname)
        if not isinstance(ann, Tensor):
            continue
        dtypes[pname] = ann.dtype
        for d, dim in enumerate(ann.shape):
            if isinstance(dim, DynamicDim) and dim.name in e.const_names:
                plan.append((dim.name, pname, d))
    return plan, dtypes


def build(fn, tensor_params, statics, consts):
    """The PrimFunc of fn for these compile-time values and constants; its ``out_idx`` lists the
    positions of the returned T.empty outputs."""
    trace, program, result = _run(fn, "build", tensor_params, statics, consts)
    e = trace.eager
    order = [p for p in e.declared if p in tensor_params]
    if order != [p for p in tensor_params if p in order]:
        raise ctx.not_implemented(f"@jit '{fn.__name__}': tensor parameters are annotated in the order {order}; "
                                  f"annotate them in the order of the signature")
    returned = result if isinstance(result, (tuple, list)) else ([] if result is None else [result])
    names = [p.name for p in trace.params]
    out_idx = []
    for r in returned:
        name = e.outputs.get(id(r))
        if name is None:
            raise ctx.error(f"@jit '{fn.__name__}' must return T.empty tensors (or nothing), got {r!r}")
        out_idx.append(names.index(name))
    if out_idx != sorted(out_idx):
        raise ctx.not_implemented(f"@jit '{fn.__name__}': return the T.empty outputs in the order they were created")
    prim = PrimFunc(program, trace.params, fn)
    prim.out_idx = out_idx
    return prim
