"""Trace state of the Python frontend: the program being built and the source line of each node.

A ``@T.prim_func`` runs its (rewritten) body once with symbolic values; every ``T.*`` call and
every arithmetic operator on a symbolic value records IR through a ``tessera._C.TlBuilder``. Before
recording, :func:`set_loc` finds the innermost frame outside tessera's own packages, so errors found
by the compiler name the kernel author's file and line.
"""
import os
import sys

from .. import _C
from .._errors import InvalidArgumentError, NotImplementedInTessera

_OWN_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d) + os.sep
    for d in ("language", "tl", "tilelang_compat")
)


class Trace:
    """One program being traced: its builder, the dynamic symbols seen so far, scope flags."""

    def __init__(self, builder):
        self.builder = builder
        self.symbols = {}  # name -> _C.TlExpr
        self.kernel_depth = 0
        self.loop_depth = 0  # open T.* loops
        self.bound_at = {}  # (code object, name) -> loop depth where the name got its current value
        self.pending_name = None  # the assignment target of the value being built (alloc names)
        self.params = []  # ParamInfo of every parameter, in the order the builder declared them
        self.eager = None  # an _eager.EagerTrace while tracing an eager-style @jit function
        self.if_depth = 0  # open symbolic ifs
        self.simt_mode = False  # per-thread kernel: thread loops split at barriers (_simt.py)
        self.simt = None  # the _simt.SimtState of the T.Kernel being traced, in SIMT mode
        self.simt_plan = None  # the _simt.Plan the traces of a per-thread kernel share
        self.local_names = set()  # names of T.alloc_local / T.alloc_var buffers (per-thread storage)
        self.if_tokens = []  # per open symbolic if: how it stands to per-thread code (_simt.enter_frame)
        self.local_counts = {}  # requested name -> T.alloc_local calls with that name so far
        self.grid_phase = 0  # T.sync_grid() barriers passed in the open T.Kernel (_grid_sync.py)

    def symbol(self, name):
        node = self.symbols.get(name)
        if node is None:
            set_loc()
            node = self.builder.dynamic(name)
            self.symbols[name] = node
        return node

    def take_name(self, default):
        name, self.pending_name = self.pending_name, None
        return name or default


_stack = []


def push(trace):
    _stack.append(trace)


def pop():
    _stack.pop()


def active():
    """The trace being recorded, or None outside a kernel."""
    return _stack[-1] if _stack else None


def current(what="this"):
    """The trace being recorded; raises when called outside a kernel."""
    if not _stack:
        raise error(f"{what} can only be used inside a @T.prim_func (or a @T.macro called from one)")
    return _stack[-1]


def user_frame():
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_OWN_DIRS):
        f = f.f_back
    return f


# (code, instruction offset) -> source line. Python 3.11 computes f_lineno by scanning the code's line
# table from its start, and every node a kernel makes asks for its line: a long kernel body paid that
# scan per node (TileKernels' top2_sum_gate spent 85% of its 3.6 s traces there).
_LINES = {}


def user_loc():
    f = user_frame()
    if f is None:
        return ("<unknown>", 0)
    key = (f.f_code, f.f_lasti)
    line = _LINES.get(key)
    if line is None:
        if len(_LINES) > 200_000:  # keeps the code objects of old kernels from piling up
            _LINES.clear()
        line = _LINES[key] = f.f_lineno
    return (f.f_code.co_filename, line)


def set_loc():
    """Tags the nodes created next with the author's current source line."""
    file, line = user_loc()
    t = active()
    if t is not None:
        t.builder.set_loc(file, line)
    else:
        _C.tl_set_loc(file, line)


def error(message):
    """An InvalidArgumentError whose message starts with the author's file:line."""
    file, line = user_loc()
    return InvalidArgumentError(f"{file}:{line}: {message}")


def not_implemented(message):
    file, line = user_loc()
    return NotImplementedInTessera(f"{file}:{line}: {message}")
