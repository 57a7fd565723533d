"""The FP8 KV-cache layouts of sparse MLA decode and their quantiser (FlashMLA's API, docs/attention.md).

V32 (656 bytes per token): 512 e4m3 values in 4 tiles of 128, 4 float32 tile scales, 64 bf16 RoPE values.
MODEL1 (584 bytes per token, laid out per block): block_size * 576 bytes of (448 e4m3 in 7 tiles of 64,
64 bf16 RoPE), then block_size * 8 bytes of scales (7 UE8M0 + 1 pad). Per tile the scale is
max(amax / 448, 1e-4) rounded up to a power of two and each value is e4m3(x / scale).
"""
import enum
from typing import Tuple

import ml_dtypes
import numpy as np

from .. import _C
from .._arrays import like, to_ref
from .._errors import InvalidArgumentError


class FP8KVCacheLayout(enum.Enum):
    V32_FP8Sparse = 1
    MODEL1_FP8Sparse = 2

    def get_meta(self) -> Tuple[int, int, int, int, int]:
        """(d, d_nope, d_rope, tile_size, num_tiles)."""
        return {FP8KVCacheLayout.V32_FP8Sparse: (576, 512, 64, 128, 4),
                FP8KVCacheLayout.MODEL1_FP8Sparse: (512, 448, 64, 64, 7)}[self]


def _layout(fn: str, kvcache_layout) -> Tuple[str, int]:
    if kvcache_layout == FP8KVCacheLayout.V32_FP8Sparse:
        return "V32", 656
    if kvcache_layout == FP8KVCacheLayout.MODEL1_FP8Sparse:
        return "MODEL1", 584
    raise InvalidArgumentError(f"{fn}: argument 'kvcache_layout' must be a FP8KVCacheLayout, got {kvcache_layout!r}")


def quantize_k_cache(input_k_cache, kvcache_layout):
    """bf16 [num_blocks, block_size, 1, d] -> float8_e4m3fn bytes [num_blocks, block_size, 1, bytes_per_token].

    Blocks are padded like FlashMLA's reference: V32 blocks hold block_size + 1 token slots, MODEL1 blocks
    are rounded up to a multiple of 576 bytes (the padding stays zero), so stride(0) exceeds
    block_size * bytes_per_token.
    """
    fn = "quantize_k_cache"
    name, bpt = _layout(fn, kvcache_layout)
    if getattr(input_k_cache, "ndim", None) != 4:
        raise InvalidArgumentError(f"{fn}: argument 'input_k_cache' must be a 4-D array "
                                   "[num_blocks, block_size, 1, d]")
    num_blocks, block_size = int(input_k_cache.shape[0]), int(input_k_cache.shape[1])
    if name == "V32":
        block_bytes = (block_size + 1) * bpt
    else:
        block_bytes = (block_size * bpt + 575) // 576 * 576
    storage = np.zeros((num_blocks, max(block_bytes, 1)), dtype=ml_dtypes.float8_e4m3fn)
    out = np.lib.stride_tricks.as_strided(storage, shape=(num_blocks, block_size, 1, bpt),
                                          strides=(storage.strides[0], bpt, bpt, 1), writeable=True)
    _C.flash_mla_quantize_k_cache(to_ref(input_k_cache, fn, "input_k_cache"), name,
                                  to_ref(out, fn, "out", writable=True))
    return like(out, input_k_cache)


def dequantize_k_cache(quant_k_cache, kvcache_layout):
    """The inverse: e4m3 -> float32 * scale -> bf16, RoPE copied; returns bf16 [num_blocks, block_size, 1, d]."""
    fn = "dequantize_k_cache"
    name, _ = _layout(fn, kvcache_layout)
    if getattr(quant_k_cache, "ndim", None) != 4:
        raise InvalidArgumentError(f"{fn}: argument 'quant_k_cache' must be a 4-D array "
                                   "[num_blocks, block_size, 1, bytes_per_token]")
    d = kvcache_layout.get_meta()[0]
    out = np.empty((int(quant_k_cache.shape[0]), int(quant_k_cache.shape[1]), 1, d), dtype=ml_dtypes.bfloat16)
    _C.flash_mla_dequantize_k_cache(to_ref(quant_k_cache, fn, "quant_k_cache"), name,
                                    to_ref(out, fn, "out", writable=True))
    return like(out, quant_k_cache)
