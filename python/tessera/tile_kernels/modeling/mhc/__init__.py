"""``tessera.tile_kernels.modeling.mhc``: the manifold-constrained hyper-connection operations of
TileKernels. ``ops`` has expand_to_mhc, mhc_head_compute_mix, mhc_pre_apply_mix,
mhc_pre_norm_fn, mhc_pre_split_mixes, mhc_post (and its halves) and sinkhorn_normalize; the other
operations and the functional layer (expand_from_embedding, mhc_pre, mhc_head) raise
``tessera.NotImplementedInTessera``."""
import importlib

from ...._errors import NotImplementedInTessera as _NotImplementedInTessera

__all__ = ["ops"]


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    if name == "ops":
        return importlib.import_module(".ops", __name__)
    raise _NotImplementedInTessera(f"tessera.tile_kernels.modeling.mhc.{name} is not implemented in tessera yet "
                                   "(docs/tile_kernels.md lists what is)")
