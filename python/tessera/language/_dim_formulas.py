"""Tensor dimensions that are expressions of T.dynamic symbols (``T.Tensor((T.ceildiv(M, 128), N))``).

Kernel libraries bind every dynamic dimension from an argument's shape, and their signature holds
constants and symbol names only. Such a dimension is therefore declared as a symbol of its own
(``<param>_dim<d>``) and the expression is kept as a formula over the other symbols, which
``JITKernel`` evaluates at each call: to check the argument's size against it, or to size an output
that no input gives. The formula is the printed IR expression, evaluated here on Python ints.
"""
import ast

from .._errors import InvalidArgumentError, NotImplementedInTessera

_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}
_CALLS = {"min": min, "max": max}


def formula_symbols(formula):
    """The symbol names a formula reads; raises ValueError when it uses an operation outside integer
    + - * // % min max (then it is not a dimension tessera can size)."""
    names = set()

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return walk(node.left) or walk(node.right)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS and not node.keywords:
            for a in node.args:
                walk(a)
            return None
        if isinstance(node, ast.Name):
            names.add(node.id)
            return None
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return None
        raise ValueError(f"'{ast.unparse(node)}' is not integer arithmetic (+ - * // % min max)")

    walk(ast.parse(formula, mode="eval"))
    return names


def evaluate(formula, symbols):
    """The formula's value with the symbols' values (a dict name -> int)."""

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.BinOp):
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Call):
            return _CALLS[node.func.id](*(ev(a) for a in node.args))
        if isinstance(node, ast.Name):
            return symbols[node.id]
        return node.value

    return int(ev(ast.parse(formula, mode="eval")))


def check_formulas(kernel_name, params):
    """Raises NotImplementedInTessera when a formula reads a symbol that no parameter has as a plain
    dimension: kernel libraries bind symbols from argument shapes only, so it would have no value."""
    plain = {d for p in params if p.is_tensor for d in p.shape if isinstance(d, str)}
    plain -= {h for p in params for h in getattr(p, "formulas", {})}
    for p in params:
        for d, formula in getattr(p, "formulas", {}).values():
            missing = sorted(formula_symbols(formula) - plain)
            if missing:
                raise NotImplementedInTessera(
                    f"kernel '{kernel_name}': '{p.name}' dimension {d} = {formula} reads {', '.join(missing)}, which "
                    f"is not a plain dimension of any tensor parameter (tessera binds T.dynamic symbols from "
                    f"argument shapes only)")


def bind_formulas(kernel_name, params, symbols):
    """Completes ``symbols`` (bound from the argument shapes) with the formula dimensions of params,
    checking those an argument gave. Raises InvalidArgumentError naming the kernel, the parameter, the
    dimension and the formula when an argument disagrees or a symbol it reads was not given."""
    for p in params:
        for hidden, (d, formula) in getattr(p, "formulas", {}).items():
            missing = sorted(n for n in formula_symbols(formula) if n not in symbols)
            if missing:
                if hidden in symbols:
                    continue  # the call fails later in the library, naming the unbound dimension's tensor
                raise InvalidArgumentError(f"kernel '{kernel_name}': cannot size '{p.name}' dimension {d} = {formula}: "
                                           f"{', '.join(missing)} is not given by any input")
            value = evaluate(formula, symbols)
            if hidden in symbols and symbols[hidden] != value:
                raise InvalidArgumentError(f"kernel '{kernel_name}': argument '{p.name}' dimension {d} is "
                                           f"{symbols[hidden]}, but its declared size {formula} is {value}")
            symbols[hidden] = value
    return symbols
