"""``tessera.tile_kernels``: DeepSeek's TileKernels API, every kernel written in tessera's tile language.

Implemented (names and arguments as in TileKernels; torch CPU tensors or numpy arrays in, the same kind
out; docs/tile_kernels.md):

- ``quant``: per_token_cast (+ _with_sf_only, _with_precomputed_sf; e4m3 and e2m1, inputs plain or
  (codes, sf) pairs), per_block_cast (+ variants), cast_back, per_token_cast_back, per_channel_cast,
  per_channel_cast_and_transpose, per_channel_cast_fused, unpack_from_e2m1fn_x2; the three SF layouts
  (row-major float32, TMA-aligned column-major, packed UE8M0) and round_sf.
- ``moe``: see tessera.tile_kernels.moe.__all__.

Not implemented: everything else TileKernels exports (e5m6 casts, the SwiGLU-fused casts,
per_block_cast_lossless, mhc, engram, transpose, modeling). Those names raise
``tessera.NotImplementedInTessera`` naming the function, here and in the submodules.
"""
import importlib

from .._errors import NotImplementedInTessera as _NotImplementedInTessera

_SUBMODULES = ("quant", "moe")
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
    # Dunder lookups (copy, pickle, inspect, pytest collection) keep Python's AttributeError contract.
    # Private names too, so `from . import _helpers` falls back to importing the submodule.
    if name.startswith("_"):
        raise AttributeError(name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise _NotImplementedInTessera(
        f"tessera.tile_kernels.{name}: this part of TileKernels is not implemented in tessera yet; "
        "implemented: quant and moe (docs/tile_kernels.md)")
