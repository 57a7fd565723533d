"""``tessera.tile_kernels.modeling``: TileKernels' modeling wrappers: ``modeling.mhc`` (the functional
layer and every operation) and ``modeling.engram`` (the gate's autograd Function); docs/tile_kernels.md."""
import importlib

__all__ = ["engram", "mhc"]


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tessera.tile_kernels.modeling' has no attribute '{name}'")
