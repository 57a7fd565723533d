"""``tessera.tile_kernels.quant``: TileKernels' quantisation casts (``from tile_kernels.quant import ...``),
the e5m6 ones included (_e5m6.py)."""
from ._casts import (cast_back, per_block_cast, per_block_cast_lossless, per_block_cast_with_precomputed_sf,
                     per_block_cast_with_sf_only, per_channel_cast, per_channel_cast_and_transpose,
                     per_channel_cast_fused, per_token_cast, per_token_cast_back,
                     per_token_cast_with_precomputed_sf, per_token_cast_with_sf_only,
                     swiglu_backward_and_per_token_cast, swiglu_forward_and_per_channel_cast_and_transpose,
                     swiglu_forward_and_per_token_cast, unpack_from_e2m1fn_x2)
from ._e5m6 import cast_back_e5m6, per_token_cast_to_e5m6

__all__ = ["cast_back", "cast_back_e5m6", "per_block_cast", "per_block_cast_lossless", "per_block_cast_with_precomputed_sf",
           "per_block_cast_with_sf_only", "per_channel_cast", "per_channel_cast_and_transpose",
           "per_channel_cast_fused", "per_token_cast", "per_token_cast_back",
           "per_token_cast_to_e5m6", "per_token_cast_with_precomputed_sf", "per_token_cast_with_sf_only",
           "swiglu_backward_and_per_token_cast", "swiglu_forward_and_per_channel_cast_and_transpose",
           "swiglu_forward_and_per_token_cast", "unpack_from_e2m1fn_x2"]
