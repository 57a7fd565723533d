"""Source rewriting of kernel functions, so plain Python control flow works on symbolic values.

A ``@T.prim_func`` / ``@T.macro`` body runs once at trace time. Python-level values (constants,
closures, loops over ``range``) simply execute. Constructs whose outcome depends on a symbolic value
are rewritten to record IR instead:

* ``if c: ... else: ...``  -> both branches are traced under a conditional when ``c`` is symbolic
  (an ordinary Python ``if`` otherwise);
* ``a and b``, ``a or b``, ``not a``, ``a < b < c``, ``x if c else y`` -> logical IR when symbolic;
* ``name = value``         -> a symbolic value is bound once at this point (a "let"), so a later
  store does not change what the name refers to; assigning to a ``T.alloc_var`` stores into it;
* ``for i, j in T.Parallel(...)`` -> the loop variables take the author's names;
* ``A: T.Tensor(...)`` on a parameter of the function (TileLang's eager style) -> the annotation is
  evaluated and declares the parameter (Python skips annotations of local names otherwise).

``return`` / ``break`` / ``continue`` inside an ``if`` on a symbolic condition, and ``while`` loops
with symbolic conditions, cannot be traced and raise an error naming the line.
"""
import ast
import copy
import functools
import sys
import inspect
import textwrap

from . import _context as ctx
from ._expr import BufferRef, Expr, VarBuffer, is_symbolic, logical_and, logical_not, logical_or
from ._grid_sync import phase_value
from ._math import if_then_else

_HELPER = "__tl"


# ---------------- helpers the rewritten code calls ----------------

class _Helpers:
    UNBOUND = object()

    @staticmethod
    def symbolic(x):
        return is_symbolic(x)

    @staticmethod
    def thread_role(cond):
        from ._threads import is_thread_role

        return is_thread_role(cond)

    @staticmethod
    def role_taken(cond, branch):
        return cond.some_take(branch)

    @staticmethod
    def then_(cond, has_else):
        return _IfScope(cond, has_else)

    @staticmethod
    def else_():
        return _ElseScope()

    @staticmethod
    def naming(name):
        t = ctx.active()
        if t is not None:
            t.pending_name = name

    @staticmethod
    def assign(name, value, scope, updates=False):
        """name = value; `updates`: the value was computed from the name's previous value (x = x + 1)."""
        t = ctx.active()
        if t is not None:
            t.pending_name = None
        old = scope.get(name, _Helpers.UNBOUND)
        if isinstance(old, VarBuffer) and old is not value:
            old.store(value)
            return old
        if t is not None:
            key = (sys._getframe(1).f_code, name)
            if updates and t.loop_depth > t.bound_at.get(key, t.loop_depth) and is_symbolic(value):
                raise ctx.error(f"'{name}' is updated inside a T loop from its value before the loop; the update is "
                                f"traced once, not once per iteration: carry it in a T.alloc_var (or T.alloc_local)")
            t.bound_at[key] = t.loop_depth
        if t is None or t.kernel_depth == 0 or not isinstance(value, Expr) or isinstance(value, VarBuffer):
            return value
        if getattr(value, "per_thread", False):
            return value  # T.get_thread_binding(): only its uses say whether the kernel can run (_threads)
        if getattr(value, "thread_lazy", False):
            return value  # an expression of the thread index: rebuilt where it is used (_simt)
        if isinstance(value, BufferRef) and any(isinstance(i, slice) for i in value.indices):
            return value  # a tile operand, not a value
        node = value.node
        if node.const_value() is not None or node.var_name() is not None:
            return value
        ctx.set_loc()
        if t.simt is not None and t.simt.var is not None:
            if t.simt.is_block_uniform(node):
                return value  # no loads, no per-thread values: the same expression is valid after a barrier
            return t.simt.bind(t, name, node, ctx.user_loc() + (name,))
        return phase_value(t, name, t.builder.let(name, node), node)

    @staticmethod
    def and_(a, b):
        if is_symbolic(a):
            return logical_and(a, b())
        if not a:
            return a
        return b()

    @staticmethod
    def or_(a, b):
        if is_symbolic(a):
            return logical_or(a, b())
        if a:
            return a
        return b()

    @staticmethod
    def not_(a):
        return logical_not(a) if is_symbolic(a) else (not a)

    @staticmethod
    def ifexp(c, t, f):
        if is_symbolic(c):
            return if_then_else(c, t(), f())
        return t() if c else f()

    @staticmethod
    def named(iterable, names):
        if hasattr(iterable, "_set_names"):
            iterable._set_names(names)
        return iterable

    @staticmethod
    def declare(name, annotation, scope):
        """`name: annotation` on a parameter: declares it in an eager trace, else keeps its value."""
        from ._eager import declare

        return declare(name, annotation, scope.get(name))

    @staticmethod
    def last_statement():
        t = ctx.active()
        if t is not None:
            t.last_statement = True

    @staticmethod
    def unsupported(what):
        raise ctx.not_implemented(what)


class _IfScope:
    def __init__(self, cond, has_else):
        self.cond, self.has_else = cond, has_else

    def __enter__(self):
        t = ctx.current("an if on a symbolic condition")
        if t.simt is not None:
            t.simt.before_frame(t)
        node = self.cond.node
        # in per-thread code: inside the thread loop, or a block-level if with thread loops inside (_simt)
        token = t.simt.enter_frame(t, t.simt.is_uniform(node)) if t.simt is not None else None
        t.if_tokens.append(token)
        ctx.set_loc()
        t.builder.begin_if(node)
        t.if_depth += 1
        if token == "block":
            t.simt.open_inside(t)

    def __exit__(self, exc_type, exc, tb):
        ended = _branch_returned(exc_type)
        if exc_type is None or ended:
            t = ctx.current()
            if self.has_else:
                if t.if_tokens[-1] == "block":
                    t.simt.close_inside(t)
                t.builder.begin_else()
                if t.if_tokens[-1] == "block":
                    t.simt.reopen_inside(t)
            else:
                _end_if(t)
        return ended


def _branch_returned(exc_type):
    """T.thread_return() ended a branch of the kernel body's last `if` (nothing follows that if)."""
    from ._threads import KernelReturn

    if exc_type is None or not issubclass(exc_type, KernelReturn):
        return False
    t = ctx.current()
    return getattr(t, "last_statement", False) and t.if_depth == 1 and t.loop_depth == 0 and t.simt is None


def _end_if(t):
    token = t.if_tokens.pop()
    if token == "block":
        t.simt.close_inside(t)
    t.builder.end_if()
    t.if_depth -= 1
    if token is not None:
        t.simt.exit_frame(t, token)
    if t.simt is not None:
        t.simt.end_of_frame(t)


class _ElseScope:
    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        ended = _branch_returned(exc_type)
        if exc_type is None or ended:
            _end_if(ctx.current())
        return ended


# ---------------- the AST transformer ----------------

def _call(attr, *args):
    return ast.Call(func=ast.Attribute(value=ast.Name(id=_HELPER, ctx=ast.Load()), attr=attr, ctx=ast.Load()),
                    args=list(args), keywords=[])


def _lambda(body):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                         kwarg=None, defaults=[]), body=body)


def _located(new, old):
    """new with old's source position (and its sub-nodes too), so errors name old's line."""
    for n in ast.walk(new):
        if "lineno" in n._attributes:
            n.lineno = n.end_lineno = old.lineno
            n.col_offset = n.end_col_offset = old.col_offset
    return new


def _target_names(t):
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _target_names(e)]
    return []


class _Escapes(ast.NodeVisitor):
    """Finds return/break/continue that would leave an `if` body (not inside nested loops/functions)."""

    def __init__(self):
        self.found = None

    def visit_Return(self, node):
        self.found = self.found or "return"

    def visit_Break(self, node):
        self.found = self.found or "break"

    def visit_Continue(self, node):
        self.found = self.found or "continue"

    def visit_For(self, node):
        for s in node.orelse:
            self.visit(s)
        # break/continue inside an inner loop stay inside it; a return does not
        inner = _Escapes()
        for s in node.body:
            inner.visit(s)
        if inner.found == "return":
            self.found = self.found or "return"

    visit_While = visit_For

    def visit_FunctionDef(self, node):
        pass

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef


def _is_kernel_item(item):
    call = item.context_expr
    return isinstance(call, ast.Call) and (
        isinstance(call.func, ast.Attribute) and call.func.attr == "Kernel" or
        isinstance(call.func, ast.Name) and call.func.id == "Kernel")


def _is_thread_return(stmt):
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and
            isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "thread_return")


def _thread_return_as_else(body):
    """``if c: A; T.thread_return()`` followed by B in a T.Kernel body becomes ``if c: A else: B``:
    the threads that take the branch do nothing more, the others run the rest."""
    for k, stmt in enumerate(body):
        if isinstance(stmt, ast.If) and not stmt.orelse and stmt.body and _is_thread_return(stmt.body[-1]):
            rest = _thread_return_as_else(body[k + 1:])  # empty when nothing follows: the return changes nothing
            then = stmt.body[:-1] or [_located(ast.Pass(), stmt)]
            new_if = ast.If(test=stmt.test, body=then, orelse=rest)
            return body[:k] + [ast.copy_location(new_if, stmt)]
    return body


class _Rewriter(ast.NodeTransformer):
    def __init__(self, params=()):
        self.counter = 0
        self.params = set(params)

    def visit_With(self, node):
        kernel = any(_is_kernel_item(item) for item in node.items)
        if kernel:
            node.body = _thread_return_as_else(node.body)
            if node.body and isinstance(node.body[-1], ast.If):
                # T.thread_return() in a branch of the body's last `if` ends that branch (_threads.thread_return)
                marker = _located(ast.Expr(_call("last_statement")), node.body[-1])
                node.body = node.body[:-1] + [marker, node.body[-1]]
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node):
        self.generic_visit(node)
        if node.value is not None or not isinstance(node.target, ast.Name) or node.target.id not in self.params:
            return node
        name = node.target.id
        return _located(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=_call(
            "declare", ast.Constant(name), node.annotation,
            ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]))), node)

    def visit_If(self, node):
        self.generic_visit(node)
        self.counter += 1
        cond = f"__tl_c{self.counter}"
        assign = ast.Assign(targets=[ast.Name(id=cond, ctx=ast.Store())], value=node.test)
        esc = _Escapes()
        for s in node.body + node.orelse:
            esc.visit(s)
        if esc.found:
            stop = ast.Expr(_call("unsupported", ast.Constant(
                f"'{esc.found}' inside an if on a symbolic condition cannot be traced; restructure it with "
                f"T.if_then_else or a condition on Python values")))
            symbolic_body = [_located(stop, node)]
        else:
            symbolic_body = [ast.With(items=[ast.withitem(context_expr=_call(
                "then_", ast.Name(id=cond, ctx=ast.Load()), ast.Constant(bool(node.orelse))))], body=node.body)]
            if node.orelse:
                symbolic_body.append(ast.With(items=[ast.withitem(context_expr=_call("else_"))], body=node.orelse))
        python_if = ast.If(test=ast.Name(id=cond, ctx=ast.Load()), body=copy.deepcopy(node.body),
                           orelse=copy.deepcopy(node.orelse))
        dispatch = ast.If(test=_call("symbolic", ast.Name(id=cond, ctx=ast.Load())), body=symbolic_body,
                          orelse=[python_if])
        if not esc.found:  # a branch on the GPU thread index: each side the block's threads take (_threads)
            role_body = [ast.If(test=_call("role_taken", ast.Name(id=cond, ctx=ast.Load()), ast.Constant(True)),
                                body=copy.deepcopy(node.body), orelse=[])]
            if node.orelse:
                role_body.append(ast.If(test=_call("role_taken", ast.Name(id=cond, ctx=ast.Load()),
                                                   ast.Constant(False)), body=copy.deepcopy(node.orelse), orelse=[]))
            dispatch = ast.If(test=_call("thread_role", ast.Name(id=cond, ctx=ast.Load())), body=role_body,
                              orelse=[dispatch])
        return [assign, dispatch]

    def visit_While(self, node):
        self.generic_visit(node)
        return node  # a symbolic condition fails in Expr.__bool__ with a message naming the line

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        expr = node.values[0]
        for v in node.values[1:]:
            expr = _call(fn, expr, _lambda(v))
        return expr

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _call("not_", node.operand)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        parts = []
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(ast.Compare(left=left, ops=[op], comparators=[right]))
            left = right
        expr = parts[0]
        for p in parts[1:]:
            expr = _call("and_", expr, _lambda(p))
        return expr

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return _call("ifexp", node.test, _lambda(node.body), _lambda(node.orelse))

    def visit_Assign(self, node):
        updates = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and any(
            isinstance(n, ast.Name) and n.id == node.targets[0].id for n in ast.walk(node.value))
        self.generic_visit(node)
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return node
        name = node.targets[0].id
        value = ast.BoolOp(op=ast.Or(), values=[_call("naming", ast.Constant(name)), node.value])
        node.value = _call("assign", ast.Constant(name), value,
                           ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]),
                           ast.Constant(updates))
        return node

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if not isinstance(node.target, ast.Name):
            return node
        name = node.target.id
        old = ast.Name(id=name, ctx=ast.Load())
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            # x += v: a T.alloc_var updates in place; anything else rebinds (and re-lets) the name
            return ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=_call(
                "assign", ast.Constant(name), ast.BinOp(left=old, op=node.op, right=node.value),
                ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]), ast.Constant(True)))
        return node

    def visit_For(self, node):
        self.generic_visit(node)
        names = _target_names(node.target)
        node.iter = _call("named", node.iter, ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()))
        return node


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # a closure variable not assigned yet
        return None


# fn.__code__ -> the compiled rewritten module. The rewrite depends only on the source (a code object
# stands for one definition; closures and globals are bound at each call), and it is not cheap: kernels
# are traced again per plan item (_simt.Plan) and factories define the same kernel for every config,
# while every `if` triples its body (symbolic, Python and thread-role dispatch), so deep nests get large.
_COMPILED = {}


def rewrite(fn):
    """fn with its body rewritten (see the module docstring); same file name and line numbers."""
    if getattr(fn, "__tl_rewritten__", False):
        return fn
    code = _COMPILED.get(fn.__code__)
    if code is None:
        code = _COMPILED[fn.__code__] = _compile_rewritten(fn)
    namespace = dict(fn.__globals__)
    namespace[_HELPER] = _Helpers
    exec(code, namespace)  # noqa: S102 - the author's own kernel source
    cells = [_cell_value(c) for c in (fn.__closure__ or ())]
    new_fn = namespace["__tl_make"](*cells)
    new_fn.__defaults__ = fn.__defaults__
    new_fn.__kwdefaults__ = fn.__kwdefaults__
    functools.update_wrapper(new_fn, fn)
    new_fn.__tl_rewritten__ = True
    return new_fn


def _compile_rewritten(fn):
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        first_line = fn.__code__.co_firstlineno
    except (OSError, TypeError) as e:
        raise ctx.error(f"cannot read the source of {getattr(fn, '__name__', fn)!r} to trace it: {e}") from e
    tree = ast.parse(source)
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise ctx.error(f"{fn!r} is not a plain function")
    fdef.decorator_list = []
    # Annotations were evaluated by the original definition (and are read from it); here they would be
    # evaluated again outside the scope that defined them.
    for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs:
        a.annotation = None
    for a in (fdef.args.vararg, fdef.args.kwarg):
        if a is not None:
            a.annotation = None
    fdef.returns = None
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs]
    rewriter = _Rewriter(params)
    fdef.body = [rewriter.visit(s) for s in fdef.body]
    fdef.body = [s for stmt in fdef.body for s in (stmt if isinstance(stmt, list) else [stmt])]
    # Free variables of the original become parameters of a wrapper, so closures keep working.
    free = list(fn.__code__.co_freevars)
    wrapper = ast.FunctionDef(name="__tl_make", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=n) for n in free], vararg=None, kwonlyargs=[], kw_defaults=[],
        kwarg=None, defaults=[]), body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
        decorator_list=[], returns=None)
    module = ast.Module(body=[wrapper], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, first_line - 1)
    return compile(module, fn.__code__.co_filename, "exec")
