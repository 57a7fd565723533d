"""``tessera.tile_kernels.modeling``: TileKernels' modeling wrappers: ``modeling.mhc`` (the functional
layer and every operation; docs/tile_kernels.md); ``modeling.engram`` raises
``tessera.NotImplementedInTessera``."""
import importlib

from ..._errors import NotImplementedInTessera as _NotImplementedInTessera

__all__ = ["mhc"]


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    if name == "mhc":
        return importlib.import_module(".mhc", __name__)
    raise _NotImplementedInTessera(f"tessera.tile_kernels.modeling.{name} is not implemented in tessera yet "
                                   "(docs/tile_kernels.md lists what is)")
