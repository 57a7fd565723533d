"""``tessera.tile_kernels.modeling.mhc``: the manifold-constrained hyper-connection layer of TileKernels:
``expand_from_embedding``, ``mhc_pre`` and ``mhc_head`` (functional.py) over the operations in ``ops``."""
from . import ops
from .functional import expand_from_embedding, mhc_head, mhc_pre

__all__ = ["expand_from_embedding", "mhc_head", "mhc_pre", "ops"]
