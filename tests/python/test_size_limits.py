"""Sizes too large to serve are refused up front with a named error, before any allocation or loop
sized by them (stride-0 views make such sizes free to pass)."""
import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import deep_gemm, flash_mla

BIG = 2**31 + 7


def broadcast(value, shape, dtype):
    """A view of `shape` over one element (all strides 0)."""
    return np.lib.stride_tricks.as_strided(np.full(1, value, dtype), shape, (0,) * len(shape))


def test_sparse_prefill_topk_above_int32():
    q = np.zeros((2, 4, 576), ml_dtypes.bfloat16)
    kv = np.zeros((16, 1, 576), ml_dtypes.bfloat16)
    with pytest.raises(tessera.InvalidArgumentError, match=r"flash_mla_sparse_fwd: argument 'indices' must list at most"):
        flash_mla.flash_mla_sparse_fwd(q, kv, broadcast(0, (2, 1, BIG), np.int32), 0.1)


def test_mla_metadata_request_count_bounded():
    with pytest.raises(tessera.InvalidArgumentError, match=r"get_mla_metadata: argument 'cache_seqlens' must hold at most"):
        flash_mla.get_mla_metadata(broadcast(1, (BIG,), np.int32), 1, 1)


def test_paged_mqa_logits_width_bounded_by_the_block_table():
    block_kv, heads, dim, blocks = 64, 8, 128, 4
    q = np.zeros((1, 1, heads, dim), ml_dtypes.float8_e4m3fn)
    kv_cache = np.zeros((blocks, block_kv, 1, dim + 4), np.uint8)
    weights = np.ones((1, heads), np.float32)
    context_lens = np.array([100], np.int32)
    block_table = np.arange(blocks, dtype=np.int32).reshape(1, blocks)
    meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, block_kv, 4)
    with pytest.raises(tessera.InvalidArgumentError, match=r"'max_context_len' \(2147483648\) must not exceed .* = 4 \* 64"):
        deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, meta, 2**31)
    logits = deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, meta, blocks * block_kv)
    assert logits.shape == (1, blocks * block_kv)
