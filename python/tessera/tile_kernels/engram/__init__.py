"""``tessera.tile_kernels.engram``: engram_hash and fused_weight; the gate kernels (engram_gate_fwd,
engram_gate_bwd, grad_w_reduce) raise ``tessera.NotImplementedInTessera``."""
from ..._errors import NotImplementedInTessera as _NotImplementedInTessera
from .. import _arrays as A
from .. import _kernels_engram as K

__all__ = ["engram_hash", "fused_weight"]
_NOT_IMPLEMENTED = ("engram_gate_fwd", "engram_gate_bwd", "grad_w_reduce")


def engram_hash(ngram_token_ids, multipliers, vocab_sizes, offsets):
    """int32 [layers, tokens, (max_ngram - 1) * tables] embedding indices: for n = 2 .. max_ngram the
    xor of ids[:, j] * multipliers[l, j] (j < n, int64), modulo vocab_sizes[l, n - 2, e] (floor
    modulo), plus offsets[l, (n - 2) * tables + e]."""
    fn = "engram_hash"
    A.require_array(fn, "ngram_token_ids", ngram_token_ids, ("int32",), ndim=2)
    A.require_array(fn, "multipliers", multipliers, ("int64",), ndim=2)
    A.require_array(fn, "vocab_sizes", vocab_sizes, ("int32",), ndim=3)
    A.require_array(fn, "offsets", offsets, ("int32",), ndim=2)
    tokens, max_ngram = ngram_token_ids.shape
    layers, _, tables = vocab_sizes.shape
    if max_ngram < 2 or tuple(multipliers.shape) != (layers, max_ngram):
        raise A.invalid_argument(fn, "multipliers", f"must have shape [{layers}, {max_ngram}] (max_ngram_size >= 2), "
                                 f"got {list(multipliers.shape)}")
    if tuple(vocab_sizes.shape) != (layers, max_ngram - 1, tables):
        raise A.invalid_argument(fn, "vocab_sizes", f"must have shape [{layers}, {max_ngram - 1}, tables], got "
                                 f"{list(vocab_sizes.shape)}")
    if tuple(offsets.shape) != (layers, (max_ngram - 1) * tables):
        raise A.invalid_argument(fn, "offsets", f"must have shape [{layers}, {(max_ngram - 1) * tables}], got "
                                 f"{list(offsets.shape)}")
    if int((vocab_sizes <= 0).sum()):
        raise A.invalid_argument(fn, "vocab_sizes", "must be positive")
    A.check_same_kind(fn, ngram_token_ids=ngram_token_ids, multipliers=multipliers, vocab_sizes=vocab_sizes,
                      offsets=offsets)
    out = A.alloc(ngram_token_ids, (layers, tokens, (max_ngram - 1) * tables), "int32")
    if tokens and layers and tables:
        K.engram_hash(max_ngram, layers, tables).call_all([ngram_token_ids, multipliers, vocab_sizes, offsets, out])
    return out


def fused_weight(weight_hidden, weight_embed):
    """float32 weight_hidden * weight_embed (both bf16 [hc_mult, hidden])."""
    fn = "fused_weight"
    A.require_array(fn, "weight_hidden", weight_hidden, ("bfloat16",), ndim=2)
    A.require_array(fn, "weight_embed", weight_embed, ("bfloat16",), ndim=2)
    if tuple(weight_embed.shape) != tuple(weight_hidden.shape):
        raise A.invalid_argument(fn, "weight_embed", f"must have weight_hidden's shape {list(weight_hidden.shape)}")
    out = A.alloc(weight_hidden, weight_hidden.shape, "float32")
    if out.shape[0] and out.shape[1]:
        K.fused_weight(*weight_hidden.shape).call_all([weight_hidden, weight_embed, out])
    return out


def __getattr__(name: str):
    if name in _NOT_IMPLEMENTED:
        raise _NotImplementedInTessera(f"tessera.tile_kernels.engram.{name} is not implemented in tessera yet "
                                       "(docs/tile_kernels.md lists what is)")
    raise AttributeError(f"module 'tessera.tile_kernels.engram' has no attribute '{name}'")
