"""``tilelang.language`` (``import tilelang.language as T``): tessera.language, plus named stubs for
TileLang constructs the CPU target does not provide (see _unsupported) and CUDA's packed pair types
(see _pairs)."""
from tessera.language import *  # noqa: F401,F403
from tessera.language import (GemmWarpPolicy, Kernel, Tensor, cast, const, dtype, dynamic, empty, macro,  # noqa: F401
                              prim_func, symbolic)
from tessera.language._dtypes import DType  # noqa: F401

from . import fp8  # noqa: F401
from ._pairs import (abs2, alloc_fragment, alloc_local, alloc_shared, bfloat16x2, float16x2, max2,  # noqa: F401
                     min2, view)
from ._unsupported import unsupported


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return unsupported(name)
