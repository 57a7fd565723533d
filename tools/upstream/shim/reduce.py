"""Source rewrites applied to DeepSeek's test files when they are loaded (the files on disk are untouched).

- shrink: integer literals >= ``threshold`` inside tuple/list displays are divided by ``factor``,
  keeping their remainder modulo 128 (so aligned sizes stay aligned and odd sizes stay odd) and at
  least 128. The suites' shapes are sized for a GPU; this brings them to what 2 CPU cores finish.
- asserts: ``assert c, m`` becomes a counted check that records a failure and goes on, so one file
  reports every failing check instead of its first.
- main block: each statement of ``if __name__ == '__main__':`` runs under a recorder that counts an
  exception as an error of that statement and continues with the next.
"""
import ast


def shrink_int(x: int, factor: int, threshold: int) -> int:
    if factor <= 1 or x < threshold:
        return x
    return max(128, (x // 128 // factor) * 128) + x % 128


class _Shrink(ast.NodeTransformer):
    def __init__(self, factor, threshold):
        self.factor, self.threshold, self.depth = factor, threshold, 0

    def visit_Subscript(self, node):  # x[a, b] indices are not shapes
        node.value = self.visit(node.value)
        return node

    def _display(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    visit_Tuple = visit_List = _display

    def visit_Constant(self, node):
        if self.depth and type(node.value) is int:
            return ast.copy_location(ast.Constant(shrink_int(node.value, self.factor, self.threshold)), node)
        return node


class _Asserts(ast.NodeTransformer):
    def __init__(self, filename):
        self.filename = filename

    def visit_Assert(self, node):
        msg = node.msg if node.msg is not None else ast.Constant(None)
        call = ast.Call(ast.Name("__shim_check__", ast.Load()),
                        [node.test, ast.Lambda(ast.arguments([], [], None, [], [], None, []), msg),
                         ast.Constant(f"{self.filename}:{node.lineno}")], [])
        return ast.copy_location(ast.Expr(call), node)


def _is_main_guard(node) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def _record(stmt):
    label = ast.unparse(stmt).splitlines()[0][:80]
    with_ = ast.With([ast.withitem(ast.Call(ast.Name("__shim_statement__", ast.Load()),
                                            [ast.Constant(label)], []))], [stmt])
    return ast.copy_location(with_, stmt)


def rewrite(source: str, filename: str, factor: int, threshold: int, guard_main: bool) -> ast.Module:
    tree = ast.parse(source, filename)
    tree = _Shrink(factor, threshold).visit(tree)
    tree = _Asserts(filename).visit(tree)
    if guard_main:
        for i, node in enumerate(tree.body):
            if _is_main_guard(node):
                node.body = [_record(s) for s in node.body]
                hook = ast.parse("__shim_wrap_cases__(globals())").body[0]
                tree.body.insert(i, hook)
                break
    return ast.fix_missing_locations(tree)
