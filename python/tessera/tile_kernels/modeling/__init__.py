"""``tessera.tile_kernels.modeling``: TileKernels' modeling wrappers. So far ``modeling.mhc.ops`` has
expand_to_mhc, mhc_head_compute_mix, mhc_pre_apply_mix, mhc_pre_norm_fn, mhc_pre_split_mixes,
mhc_post and sinkhorn_normalize (docs/tile_kernels.md); the engram
wrappers and the other mhc operations raise ``tessera.NotImplementedInTessera``."""
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
