"""``tilelang`` on tessera: TileLang's top-level API forwarding to tessera.tl (an opt-in alias, see
tessera.tilelang_compat). Kernels compile for the CPU; docs/tl.md lists the differences."""
import tessera as _tessera
from tessera.tl import JITKernel, Profiler, TensorSupplyType, autotune, compile, jit  # noqa: A004, F401
from tessera.tl import profiler as _tessera_profiler

from . import autotuner, contrib, language, layout, profiler, testing, utils  # noqa: F401
from ._config import PassConfigKey, clear_cache, disable_cache, enable_cache, is_cache_enabled, set_log_level  # noqa: F401
from .language import dtype as DataType  # noqa: F401,N812 - TileLang re-exports TVM's DataType

import tvm  # noqa: E402,F401 - `from tilelang import tvm`: the minimal tvm beside this package

__tessera_alias__ = True
__version__ = f"0.0.0+tessera{_tessera.__version__}"

# TileLang's profiler hands torch tensors to reference programs; so does this one when torch is here.
_tessera_profiler.set_input_kind("torch")
