"""Exception classes raised by tessera (the native module maps ``tessera::Error`` codes onto them).

``InvalidArgumentError`` is both a ``ValueError`` (what Python code expects for a bad argument) and a
``RuntimeError`` (what DeepGEMM raises for a failed precondition), so code written against either
convention catches it. Messages name the function, the argument and the violated rule.
"""


class TesseraError(Exception):
    """Base class of every error tessera raises on purpose."""


class InvalidArgumentError(TesseraError, ValueError, RuntimeError):
    """An argument violates a documented rule (dtype, shape, stride, layout, value range)."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument has the wrong Python type (None, a list, a float where an array or an int is needed).
    Also a ``TypeError``, which DeepSeek's interfaces raise for these."""


class NotImplementedInTessera(TesseraError, NotImplementedError):
    """A documented combination that this build of tessera does not provide (yet)."""


class TesseraRuntimeError(TesseraError, RuntimeError):
    """The environment failed (allocation, compiler, timeout, a peer process died)."""


def invalid_argument(fn: str, arg: str, rule: str) -> InvalidArgumentError:
    """Builds the error for argument ``arg`` of ``fn`` in the native layer's message format."""
    return InvalidArgumentError(f"{fn}: argument '{arg}' {rule}")


def out_of_memory(fn: str, what: str, shape, itemsize: int) -> TesseraRuntimeError:
    """The error for an allocation the machine cannot serve (a valid but too large problem)."""
    n = 1
    for d in shape:
        n *= int(d)
    return TesseraRuntimeError(f"{fn}: cannot allocate {what} of shape {list(shape)} ({n * itemsize} bytes)")
