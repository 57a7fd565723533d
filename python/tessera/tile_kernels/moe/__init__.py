"""``tessera.tile_kernels.moe``: TileKernels' MoE routing kernels (``from tile_kernels.moe import ...``).

Not implemented (raise ``tessera.NotImplementedInTessera`` on lookup): the names in _NOT_IMPLEMENTED.
"""
from ..._errors import NotImplementedInTessera as _NotImplementedInTessera
from ._gate import top2_sum_gate
from ._routing import (aux_fi, expand_to_fused, expand_to_fused_with_sf, get_fused_mapping, group_count,
                       inplace_unique_group_indices, mask_indices_by_tp, normalize_weight, reduce_fused, topk_gate,
                       topk_sum_and_topk_group_idx)

__all__ = ["aux_fi", "expand_to_fused", "expand_to_fused_with_sf", "get_fused_mapping", "group_count",
           "inplace_unique_group_indices", "mask_indices_by_tp", "normalize_weight", "reduce_fused", "top2_sum_gate", "topk_gate",
           "topk_sum_and_topk_group_idx"]

_NOT_IMPLEMENTED = ()


def __getattr__(name: str):
    if name in _NOT_IMPLEMENTED:
        raise _NotImplementedInTessera(f"tessera.tile_kernels.moe.{name} is not implemented in tessera yet "
                                       "(docs/tile_kernels.md lists what is)")
    raise AttributeError(f"module 'tessera.tile_kernels.moe' has no attribute '{name}'")
