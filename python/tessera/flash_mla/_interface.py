"""FlashMLA's scheduling metadata, decode, sparse prefill and dense prefill (forward) entry points.

Outputs are new arrays of the caller's kind (numpy, or torch CPU tensors sharing the numpy memory).
Validation happens in C++ before anything is computed; errors are ``tessera.InvalidArgumentError`` (a
ValueError and a RuntimeError) naming the argument and the rule.
"""
import dataclasses
import numbers
from typing import Optional, Tuple

import numpy as np

from .. import _C
from .._arrays import like, new_output, optional_ref, to_numpy, to_ref
from .._errors import ArgumentTypeError, InvalidArgumentError
from . import _varlen_autograd

_HELP = ("; your input arguments are inconsistent with sched_meta: pass the same shapes and flags to every "
         "flash_mla_with_kvcache call that shares one FlashMLASchedMeta (or get a new one from get_mla_metadata)")


@dataclasses.dataclass
class FlashMLASchedMeta:
    """The work partition of flash_mla_with_kvcache, filled by the first call that uses it."""

    @dataclasses.dataclass
    class Config:
        b: int
        s_q: int
        h_q: int
        page_block_size: int
        h_k: int

        causal: bool
        is_fp8_kvcache: bool
        topk: Optional[int]

        extra_page_block_size: Optional[int]
        extra_topk: Optional[int]

    have_initialized: bool = False
    config: Optional[Config] = None
    # The caller's kind of array (torch tensors when q is one, as FlashMLA holds; numpy otherwise).
    tile_scheduler_metadata: Optional[object] = None  # int32 [parts, 8]
    num_splits: Optional[object] = None               # int32 [batch_size + 1]


def _int(fn: str, arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be an int, got {type(value).__name__}")
    return int(value)


def _float(fn: str, arg: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a float, got {type(value).__name__}")
    return float(value)


def _old_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k, num_heads_q=None, is_fp8_kvcache=False,
                  topk=None):
    fn = "get_mla_metadata"
    tile, parts, splits = _C.flash_mla_get_metadata(
        to_ref(cache_seqlens, fn, "cache_seqlens"), _int(fn, "num_q_tokens_per_head_k", num_q_tokens_per_head_k),
        _int(fn, "num_heads_k", num_heads_k), None if num_heads_q is None else _int(fn, "num_heads_q", num_heads_q),
        bool(is_fp8_kvcache), None if topk is None else _int(fn, "topk", topk))
    return (like(np.asarray(tile, dtype=np.int32).reshape(parts, 8), cache_seqlens),
            like(np.asarray(splits, dtype=np.int32), cache_seqlens))


def get_mla_metadata(*args, **kwargs):
    """``get_mla_metadata()`` -> ``(FlashMLASchedMeta(), None)``: the first flash_mla_with_kvcache call fills it.

    The old form ``get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k, num_heads_q=None,
    is_fp8_kvcache=False, topk=None)`` returns ``(tile_scheduler_metadata, num_splits)``: int32 [parts, 8]
    ranges of (request, split) items per thread and int32 [b + 1] prefix sums of each request's split count
    (a sparse call, ``topk`` given, splits every request's topk-long lists). Pass both to
    flash_mla_with_kvcache in place of a FlashMLASchedMeta; they give the same bits as the current form.
    """
    if not args and not kwargs:
        return FlashMLASchedMeta(), None
    return _old_metadata(*args, **kwargs)


get_mla_decoding_metadata = get_mla_metadata


def _config(q, k_cache, causal, is_fp8_kvcache, indices, extra_k_cache, extra_indices_in_kvcache):
    return FlashMLASchedMeta.Config(
        b=q.shape[0], s_q=q.shape[1], h_q=q.shape[2], page_block_size=k_cache.shape[1], h_k=k_cache.shape[2],
        causal=bool(causal), is_fp8_kvcache=bool(is_fp8_kvcache),
        topk=None if indices is None else indices.shape[-1],
        extra_page_block_size=None if extra_k_cache is None else extra_k_cache.shape[1],
        extra_topk=None if extra_indices_in_kvcache is None else extra_indices_in_kvcache.shape[-1])


def _check_config(recorded: FlashMLASchedMeta.Config, now: FlashMLASchedMeta.Config) -> None:
    fields = [("b", "batch_size"), ("s_q", "seq_len_q"), ("h_q", "num_heads_q"),
              ("page_block_size", "page_block_size"), ("h_k", "num_heads_k"), ("causal", "causal"),
              ("is_fp8_kvcache", "is_fp8_kvcache"), ("topk", "the last dim of indices"),
              ("extra_page_block_size", "the page_block_size of extra_k_cache"),
              ("extra_topk", "the last dim of extra_indices_in_kvcache")]
    for field, what in fields:
        r, n = getattr(recorded, field), getattr(now, field)
        if r != n:
            raise InvalidArgumentError(f"flash_mla_with_kvcache: sched_meta.config.{field} must be equal to {what} "
                                       f"(recorded {r}, got {n}){_HELP}")


def _schedule_lists(fn: str, tile_scheduler_metadata, num_splits):
    if num_splits is None:
        raise InvalidArgumentError(f"{fn}: argument 'num_splits' must be given with an array "
                                   "tile_scheduler_metadata (the old get_mla_metadata form returns both)")
    tile = np.asarray(to_numpy(tile_scheduler_metadata))
    splits = np.asarray(to_numpy(num_splits))
    if tile.dtype != np.int32 or tile.ndim != 2 or tile.shape[1] != 8:
        raise InvalidArgumentError(f"{fn}: argument 'tile_scheduler_metadata' must be int32 [parts, 8], got "
                                   f"{tile.dtype} {list(tile.shape)}")
    if splits.dtype != np.int32 or splits.ndim != 1:
        raise InvalidArgumentError(f"{fn}: argument 'num_splits' must be int32 [batch_size + 1], got "
                                   f"{splits.dtype} {list(splits.shape)}")
    return tile.reshape(-1).tolist(), splits.tolist()


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits=None, softmax_scale=None, causal=False, is_fp8_kvcache=False, indices=None,
                           attn_sink=None, extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None,
                           extra_topk_length=None) -> Tuple[object, object]:
    """MLA decode -> ``(out [b, s_q, h_q, head_dim_v] in q's dtype, lse [b, h_q, s_q] float32)``.

    Dense (``indices`` None): q [b, s_q, h_q, d] bf16|fp16, k_cache [blocks, page_block_size, h_k, d],
    block_table [b, max_blocks] int32, cache_seqlens [b] int32; ``causal`` is bottom-right aligned.
    Sparse: is_fp8_kvcache=True, k_cache [blocks, block_size, 1, 656 (V32) | 584 (MODEL1)] bytes, q
    [b, s_q, h_q, 576|512] bf16, indices [b, s_q, topk] int32 flat slots; -1 and any out-of-range index are
    skipped. ``topk_length`` [b], ``attn_sink`` [h_q] float32, and an ``extra_k_cache`` with
    ``extra_indices_in_kvcache`` [b, s_q, extra_topk] (and ``extra_topk_length``) joining the same softmax.
    A row with no token gets out 0 and lse +inf; a NaN in q or in a key the row sees makes its out and
    lse NaN. ``tile_scheduler_metadata`` is a FlashMLASchedMeta (then ``num_splits`` must be None), or the
    arrays of the old get_mla_metadata form.
    """
    fn = "flash_mla_with_kvcache"
    if getattr(q, "ndim", None) != 4:
        raise InvalidArgumentError(f"{fn}: argument 'q' must be a 4-D array [b, s_q, h_q, head_dim]")
    if getattr(k_cache, "ndim", None) != 4:
        raise InvalidArgumentError(f"{fn}: argument 'k_cache' must be a 4-D array [blocks, block_size, h_k, d]")
    head_dim_v = _int(fn, "head_dim_v", head_dim_v)
    meta = tile_scheduler_metadata if isinstance(tile_scheduler_metadata, FlashMLASchedMeta) else None
    config = _config(q, k_cache, causal, is_fp8_kvcache, indices, extra_k_cache, extra_indices_in_kvcache)
    if meta is not None:
        if num_splits is not None:
            raise InvalidArgumentError(f"{fn}: argument 'num_splits' must be None with a FlashMLASchedMeta")
        if meta.have_initialized:
            _check_config(meta.config, config)
            tile, splits = _schedule_lists(fn, meta.tile_scheduler_metadata, meta.num_splits)
        else:
            tile = splits = None
    else:
        tile, splits = _schedule_lists(fn, tile_scheduler_metadata, num_splits)

    b, s_q, h_q = (int(x) for x in q.shape[:3])
    out = new_output(fn, "out", (b, s_q, h_q, max(head_dim_v, 0)), to_numpy(q).dtype)
    lse = new_output(fn, "lse", (b, h_q, s_q), np.float32)
    new_tile, parts, new_splits = _C.flash_mla_with_kvcache(
        to_ref(q, fn, "q"), to_ref(k_cache, fn, "k_cache"), optional_ref(block_table, fn, "block_table"),
        optional_ref(cache_seqlens, fn, "cache_seqlens"), head_dim_v, tile, splits,
        None if softmax_scale is None else float(softmax_scale), bool(causal), bool(is_fp8_kvcache),
        optional_ref(indices, fn, "indices"), optional_ref(attn_sink, fn, "attn_sink"),
        optional_ref(extra_k_cache, fn, "extra_k_cache"),
        optional_ref(extra_indices_in_kvcache, fn, "extra_indices_in_kvcache"),
        optional_ref(topk_length, fn, "topk_length"), optional_ref(extra_topk_length, fn, "extra_topk_length"),
        to_ref(out, fn, "out", writable=True), to_ref(lse, fn, "lse", writable=True))
    if meta is not None and not meta.have_initialized:
        meta.have_initialized = True
        meta.config = config
        meta.tile_scheduler_metadata = like(np.asarray(new_tile, dtype=np.int32).reshape(parts, 8), q)
        meta.num_splits = like(np.asarray(new_splits, dtype=np.int32), q)
    return like(out, q), like(lse, q)


def flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None):
    """Sparse MLA prefill -> ``(out [s_q, h_q, d_v] bf16, max_logits [s_q, h_q] f32, lse [s_q, h_q] f32)``.

    q [s_q, h_q, d_qk] bf16, kv [s_kv, h_kv, d_qk] bf16, indices [s_q, h_kv, topk] int32 (< 0 or >= s_kv:
    skipped), attn_sink [h_q] float32 (scales out by 1/(1+exp(sink-lse)); max_logits and lse unchanged),
    topk_length [s_q] int32. max_logits and lse are natural-log; a query with no valid index gets out 0,
    max_logits -inf and lse +inf.
    """
    fn = "flash_mla_sparse_fwd"
    if getattr(q, "ndim", None) != 3:
        raise InvalidArgumentError(f"{fn}: argument 'q' must be a 3-D array [s_q, h_q, d_qk]")
    d_v = _int(fn, "d_v", d_v)
    s_q, h_q = int(q.shape[0]), int(q.shape[1])
    out = new_output(fn, "out", (s_q, h_q, max(d_v, 0)), to_numpy(q).dtype)
    max_logits = new_output(fn, "max_logits", (s_q, h_q), np.float32)
    lse = new_output(fn, "lse", (s_q, h_q), np.float32)
    _C.flash_mla_sparse_fwd(to_ref(q, fn, "q"), to_ref(kv, fn, "kv"), to_ref(indices, fn, "indices"),
                            _float(fn, "sm_scale", sm_scale), d_v, optional_ref(attn_sink, fn, "attn_sink"),
                            optional_ref(topk_length, fn, "topk_length"), to_ref(out, fn, "out", writable=True),
                            to_ref(max_logits, fn, "max_logits", writable=True),
                            to_ref(lse, fn, "lse", writable=True))
    return like(out, q), like(max_logits, q), like(lse, q)


def flash_attn_varlen_func(q, k, v, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo, max_seqlen_kv, dropout_p=0.0,
                           softmax_scale=None, causal=False, deterministic=False, is_varlen=True):
    """Dense MHA prefill, forward -> ``(out [total_q, h_q, d_v] in q's dtype, lse [total_q, h_q] float32)``.

    q [total_q, h_q, d_qk], k [total_kv, h_kv, d_qk], v [total_kv, h_kv, d_v] (bf16 or fp16);
    cu_seqlens_qo / cu_seqlens_kv int32 [b + 1] prefix sums; causal masks bottom-right (query j of a request
    with n_q queries sees keys 0..n_kv-n_q+j); h_q % h_kv == 0. A query that sees no key gets out 0 and
    lse +inf. dropout_p must be 0; ``deterministic`` is accepted (every result is deterministic here).
    ``is_varlen=False`` is FlashMLA's hint that every request has the same lengths; the cu_seqlens still
    describe the layout, so the result is the same and the hint needs no separate path here.
    Autograd: with torch tensors, grad mode on and q, k or v requiring grad, out and lse carry a graph
    whose backward is flash_attn_varlen_bwd (dq, dk, dv in q's dtype; lse's gradient is honoured too).
    """
    fn = "flash_attn_varlen_func"
    if dropout_p != 0.0:
        raise InvalidArgumentError(f"{fn}: argument 'dropout_p' must be 0.0 (dropout is not supported), got {dropout_p}")
    if not isinstance(is_varlen, (bool, np.bool_)):
        raise ArgumentTypeError(f"{fn}: argument 'is_varlen' must be a bool, got {type(is_varlen).__name__}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if getattr(x, "ndim", None) != 3:
            raise InvalidArgumentError(f"{fn}: argument '{name}' must be a 3-D array [tokens, heads, head_dim]")
    if _varlen_autograd.needs_grad(q, k, v):
        return _varlen_autograd.apply(
            q, k, v, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo, max_seqlen_kv, causal, softmax_scale,
            lambda q_, k_, v_: flash_attn_varlen_func(q_, k_, v_, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo,
                                                      max_seqlen_kv, 0.0, softmax_scale, causal))
    total_q, h_q = int(q.shape[0]), int(q.shape[1])
    out = new_output(fn, "out", (total_q, h_q, int(v.shape[2])), to_numpy(q).dtype)
    lse = new_output(fn, "lse", (h_q, total_q), np.float32).T  # FlashMLA's layout: contiguous along the tokens
    _C.flash_attn_varlen_fwd(to_ref(q, fn, "q"), to_ref(k, fn, "k"), to_ref(v, fn, "v"),
                             to_ref(cu_seqlens_qo, fn, "cu_seqlens_qo"), to_ref(cu_seqlens_kv, fn, "cu_seqlens_kv"),
                             _int(fn, "max_seqlen_qo", max_seqlen_qo), _int(fn, "max_seqlen_kv", max_seqlen_kv),
                             None if softmax_scale is None else float(softmax_scale), bool(causal),
                             to_ref(out, fn, "out", writable=True), to_ref(lse, fn, "lse", writable=True))
    return like(out, q), like(lse, q)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, head_dim_qk, dropout_p=0.0, softmax_scale=None,
                                     causal=False, deterministic=False, is_varlen=True):
    """flash_attn_varlen_func on qkv [total, h, 2 * head_dim_qk + d_v] (q, k, v side by side)."""
    return flash_attn_varlen_func(qkv[:, :, :head_dim_qk], qkv[:, :, head_dim_qk:2 * head_dim_qk],
                                  qkv[:, :, 2 * head_dim_qk:], cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                                  dropout_p, softmax_scale, causal, deterministic, is_varlen)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo, max_seqlen_kv, head_dim_qk,
                                    dropout_p=0.0, softmax_scale=None, causal=False, deterministic=False,
                                    is_varlen=True):
    """flash_attn_varlen_func with kv [total_kv, h_kv, head_dim_qk + d_v] (k, v side by side)."""
    return flash_attn_varlen_func(q, kv[:, :, :head_dim_qk], kv[:, :, head_dim_qk:], cu_seqlens_qo, cu_seqlens_kv,
                                  max_seqlen_qo, max_seqlen_kv, dropout_p, softmax_scale, causal, deterministic,
                                  is_varlen)
