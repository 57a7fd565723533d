"""``tessera.flash_mla``: FlashMLA's attention API on the CPU (``from tessera import flash_mla``).

Names, argument names and defaults follow FlashMLA's ``flash_mla_interface`` (docs/attention.md and
docs/compat.md here):

- ``get_mla_metadata()`` returns ``(FlashMLASchedMeta(), None)``; the first ``flash_mla_with_kvcache``
  call records its configuration and work partition in it, later calls must match (InvalidArgumentError
  naming the field otherwise). Called with ``cache_seqlens`` (the old form: ``cache_seqlens,
  num_q_tokens_per_head_k, num_heads_k, num_heads_q=None, is_fp8_kvcache=False, topk=None``) it returns
  ``(tile_scheduler_metadata int32 [parts, 8], num_splits int32 [b + 1])``: tessera's own partition of the
  requests' token lists into splits (``num_splits`` prefix sums) and of the splits over threads.
  ``get_mla_decoding_metadata`` is the old name.
- ``flash_mla_with_kvcache``: dense decode over a paged bf16/fp16 cache, or sparse decode over an FP8 cache
  (V32 656-byte or MODEL1 584-byte tokens) when ``indices`` is given.
- ``flash_mla_sparse_fwd``: sparse prefill -> ``(out, max_logits, lse)``.
- ``quantize_k_cache`` / ``dequantize_k_cache`` with ``FP8KVCacheLayout``: the FP8 cache byte layouts.
- ``flash_attn_varlen_func`` (and the qkv/kv-packed variants): dense MHA prefill; torch inputs that
  require grad get an autograd graph (backward: C++ ``flash_attn_varlen_bwd``); ``is_varlen=False``
  (FlashMLA's equal-lengths hint) gives the same result.
- ``flash_mla_interface``: the submodule FlashMLA defines these names in. ``__version__``: the FlashMLA
  release whose interface this follows.

Results are bitwise identical for any thread count; split boundaries depend only on the problem.
"""
from . import flash_mla_interface
from ._interface import (
    FlashMLASchedMeta,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_mla_sparse_fwd,
    flash_mla_with_kvcache,
    get_mla_decoding_metadata,
    get_mla_metadata,
)
from ._quant import FP8KVCacheLayout, dequantize_k_cache, quantize_k_cache

__version__ = "1.0.0"

__all__ = [
    "FP8KVCacheLayout",
    "FlashMLASchedMeta",
    "dequantize_k_cache",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_mla_interface",
    "flash_mla_sparse_fwd",
    "flash_mla_with_kvcache",
    "get_mla_decoding_metadata",
    "get_mla_metadata",
    "quantize_k_cache",
]
