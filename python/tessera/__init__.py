"""tessera: DeepSeek-style GEMM (and more) on multi-core CPUs.

``from tessera import deep_gemm`` is call-compatible with DeepGEMM's dense API. The top level holds
runtime controls shared by every component: threads, CPU features and the instruction-set cap.
"""
from . import _C
from ._errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    NotImplementedInTessera,
    TesseraError,
    TesseraRuntimeError,
)

__version__ = _C.__version__

__all__ = [
    "__version__",
    "ArgumentTypeError",
    "InvalidArgumentError",
    "NotImplementedInTessera",
    "TesseraError",
    "TesseraRuntimeError",
    "cpu_info",
    "kernel_registry",
    "jit",
    "num_threads",
    "set_isa",
    "set_num_threads",
]


def jit(*args, **kwargs):
    """``@tessera.jit``: compiles tile-language kernels (``tessera.language``); see tessera.tl.jit."""
    from .tl import jit as tl_jit

    return tl_jit(*args, **kwargs)


def num_threads() -> int:
    """Number of threads parallel kernels use (the calling thread counts as one)."""
    return _C.num_threads()


def set_num_threads(n: int) -> None:
    """Sets the thread count for all kernels; ``n <= 0`` restores the default
    (the logical CPUs available, or ``TESSERA_NUM_THREADS``)."""
    _C.set_num_threads(int(n))


def cpu_info() -> dict:
    """This machine as tessera sees it: ``vendor``, ``model``, ``logical_cpus``, ``features`` (list),
    ``best_isa`` (what the hardware supports), ``active_isa`` (what kernels use now) and the data cache
    sizes ``l1d_bytes``, ``l2_bytes`` (per core) and ``l3_bytes`` (shared)."""
    return _C.cpu_info()


def kernel_registry() -> str:
    """The kernel registry as text: for every kernel slot, the implementation each ISA level runs
    (the same table as ``tessera info --kernels``)."""
    return _C.kernel_registry()


def set_isa(name) -> None:
    """Caps the instruction set kernels may use: ``"scalar"`` (the reference path), ``"avx2"``,
    ``"avx512"``, ``"avx512bf16"`` or ``"amx"`` (AMX tiles, used by the packed GEMMs); ``None`` lifts the cap. For validating fast paths against the
    reference on one machine; the environment variable ``TESSERA_ISA`` sets the initial cap."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"set_isa: argument 'name' must be a str or None, got {type(name).__name__}")
    _C.set_isa(name)
