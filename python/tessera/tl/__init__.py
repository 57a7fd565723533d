"""tessera.tl - compiling and running tile-language kernels (TileLang's ``tilelang`` package API).

``tessera.jit`` (also ``tessera.tl.jit``) compiles kernels written with ``tessera.language``;
``tessera.tl.autotune`` tunes them; ``tessera.tl.profiler`` times and checks them; ``tessera tlc``
(``python -m tessera.tl.aot``) builds a kernel library callable from C++ without Python.
Compiled kernels are cached in ``cache_dir()`` ($TESSERA_TL_CACHE or ~/.cache/tessera/tl).
"""
from .. import _C
from .autotuner import autotune
from .jit import compile, jit  # noqa: A004
from .kernel import JITKernel
from .profiler import Profiler, TensorSupplyType, do_bench


def cache_dir():
    """The folder compiled kernels are cached in."""
    return _C.tl_cache_dir("")


def load_library(path):
    """A kernel library written by JITKernel.export_library / `tessera tlc` (low-level handle)."""
    return _C.tl_load_library(str(path))


__all__ = ["JITKernel", "Profiler", "TensorSupplyType", "autotune", "cache_dir", "compile", "do_bench", "jit",
           "load_library"]
