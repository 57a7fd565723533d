"""``tessera.tile_kernels.quant``: TileKernels' quantisation casts (``from tile_kernels.quant import ...``).

Not implemented (raise ``tessera.NotImplementedInTessera`` on lookup): the names in _NOT_IMPLEMENTED.
"""
from ..._errors import NotImplementedInTessera as _NotImplementedInTessera
from ._casts import (cast_back, per_block_cast, per_block_cast_lossless, per_block_cast_with_precomputed_sf,
                     per_block_cast_with_sf_only, per_channel_cast, per_channel_cast_and_transpose,
                     per_channel_cast_fused, per_token_cast, per_token_cast_back,
                     per_token_cast_with_precomputed_sf, per_token_cast_with_sf_only,
                     swiglu_backward_and_per_token_cast, swiglu_forward_and_per_channel_cast_and_transpose,
                     swiglu_forward_and_per_token_cast, unpack_from_e2m1fn_x2)

__all__ = ["cast_back", "per_block_cast", "per_block_cast_lossless", "per_block_cast_with_precomputed_sf",
           "per_block_cast_with_sf_only", "per_channel_cast", "per_channel_cast_and_transpose",
           "per_channel_cast_fused", "per_token_cast", "per_token_cast_back",
           "per_token_cast_with_precomputed_sf", "per_token_cast_with_sf_only",
           "swiglu_backward_and_per_token_cast", "swiglu_forward_and_per_channel_cast_and_transpose",
           "swiglu_forward_and_per_token_cast", "unpack_from_e2m1fn_x2"]

_NOT_IMPLEMENTED = ("per_token_cast_to_e5m6", "cast_back_e5m6")


def __getattr__(name: str):
    if name in _NOT_IMPLEMENTED:
        raise _NotImplementedInTessera(f"tessera.tile_kernels.quant.{name} is not implemented in tessera yet "
                                       "(docs/tile_kernels.md lists what is)")
    raise AttributeError(f"module 'tessera.tile_kernels.quant' has no attribute '{name}'")
