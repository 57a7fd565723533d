"""``tessera.tile_kernels``: DeepSeek's TileKernels API, every kernel written in tessera's tile language.

Implemented (names and arguments as in TileKernels; torch CPU tensors or numpy arrays in, the same kind
out; docs/tile_kernels.md):

- ``quant``: per_token_cast (+ _with_sf_only, _with_precomputed_sf; e4m3 and e2m1, inputs plain or
  (codes, sf) pairs), per_block_cast (+ variants), per_block_cast_lossless, cast_back,
  per_token_cast_back, per_channel_cast, per_channel_cast_and_transpose, per_channel_cast_fused, the
  SwiGLU casts (swiglu_forward_and_per_token_cast, swiglu_backward_and_per_token_cast,
  swiglu_forward_and_per_channel_cast_and_transpose) and unpack_from_e2m1fn_x2; the three SF layouts
  (row-major float32, TMA-aligned column-major, packed UE8M0) and round_sf; the e5m6 casts
  (per_token_cast_to_e5m6, cast_back_e5m6).
- ``moe``: every routing function (topk_gate, top2_sum_gate, topk_sum_and_topk_group_idx,
  normalize_weight, group_count, aux_fi, mask_indices_by_tp, inplace_unique_group_indices,
  get_fused_mapping, expand_to_fused(_with_sf), reduce_fused).
- ``transpose``: transpose, batched_transpose.
- ``engram``: engram_hash, fused_weight, engram_gate_fwd, engram_gate_bwd, grad_w_reduce.
- ``modeling.mhc``: expand_from_embedding, mhc_pre, mhc_head and ``ops`` (expand_to_mhc,
  mhc_head_compute_mix, mhc_pre_apply_mix, mhc_pre_norm_fn, mhc_pre_split_mixes, mhc_post (+ _fwd /
  _bwd), sinkhorn_normalize, mhc_pre_big_fuse, mhc_multilayer_recompute): forward and, for torch
  tensors, backward through torch.autograd.
- ``modeling.engram``: engram_gate / EngramGateFn (torch autograd).

Not implemented: the mhc kernel package (its operations are in modeling.mhc.ops);
those names raise ``tessera.NotImplementedInTessera`` naming the function.
"""
import importlib

from .._errors import NotImplementedInTessera as _NotImplementedInTessera

_SUBMODULES = ("quant", "moe", "transpose", "engram", "modeling")
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
        "implemented: quant, moe, transpose, engram and part of modeling (docs/tile_kernels.md)")
