"""``tessera.tile_kernels.engram``: engram_hash, fused_weight, the Engram gate forward and backward
(engram_gate_fwd, engram_gate_bwd) and the weight-gradient reduction (grad_w_reduce), TileKernels'
names and arguments."""
import numbers

from .. import _arrays as A
from .. import _kernels_engram as K

__all__ = ["engram_gate_bwd", "engram_gate_fwd", "engram_hash", "fused_weight", "grad_w_reduce"]

# Blocks of engram_gate_bwd's weight-gradient partials (TileKernels: its GPU's persistent blocks): a
# constant, so the sums and grad_w_partial's shape do not depend on the machine or the thread count.
GATE_BWD_BLOCKS = 32


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


def _contiguous(x):
    return x if A.is_contiguous(x) else (x.contiguous() if hasattr(x, "contiguous") else x.copy(order="C"))


def _require_float(fn, arg, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise A.ArgumentTypeError(f"{fn}: argument '{arg}' must be a float, got {type(v).__name__}")
    return float(v)


def _gate_inputs(fn, hidden_states, k, v, weight_fused):
    A.require_array(fn, "hidden_states", hidden_states, ("bfloat16",), ndim=3)
    tokens, hc_mult, hidden = (int(d) for d in hidden_states.shape)
    A.require_array(fn, "k", k, ("bfloat16",), ndim=3)
    A.require_array(fn, "v", v, ("bfloat16",), ndim=2)
    A.require_array(fn, "weight_fused", weight_fused, ("float32",), ndim=2)
    if tuple(k.shape) != (tokens, hc_mult, hidden):
        raise A.invalid_argument(fn, "k", f"must have hidden_states' shape {[tokens, hc_mult, hidden]}, got "
                                 f"{list(k.shape)}")
    if tuple(v.shape) != (tokens, hidden):
        raise A.invalid_argument(fn, "v", f"must have shape {[tokens, hidden]}, got {list(v.shape)}")
    if tuple(weight_fused.shape) != (hc_mult, hidden):
        raise A.invalid_argument(fn, "weight_fused", f"must have shape {[hc_mult, hidden]}, got "
                                 f"{list(weight_fused.shape)}")
    return tokens, hc_mult, hidden


def engram_gate_fwd(hidden_states, k, v, weight_fused, eps, clamp_value, save_for_backward=True):
    """Engram gate forward: output = x + sigmoid(signed_sqrt(d)) * v per token and head, with
    d = sum(x * weight_fused * k) * rstd_x * rstd_k / sqrt(hidden) (float32 sums, RMS over the hidden
    dimension plus eps), signed_sqrt(d) = sign(d) * sqrt(max(|d|, clamp_value)). x, k: bf16 [tokens,
    hc_mult, hidden]; v: bf16 [tokens, hidden]; weight_fused: float32 [hc_mult, hidden] (fused_weight).
    Returns (output, dot, gate_score, rstd_x, rstd_k): dot the raw sum(x * weight_fused * k), all four
    float32 [tokens, hc_mult]; None for them when save_for_backward is False."""
    fn = "engram_gate_fwd"
    tokens, hc_mult, hidden = _gate_inputs(fn, hidden_states, k, v, weight_fused)
    eps = _require_float(fn, "eps", eps)
    clamp_value = _require_float(fn, "clamp_value", clamp_value)
    A.check_same_kind(fn, hidden_states=hidden_states, k=k, v=v, weight_fused=weight_fused)
    save = bool(save_for_backward)
    output = A.alloc(hidden_states, (tokens, hc_mult, hidden), "bfloat16")
    saved = [A.alloc(hidden_states, (tokens, hc_mult), "float32") for _ in range(4)]
    if tokens and hc_mult and hidden:
        K.engram_gate_fwd(hc_mult, hidden, eps, clamp_value, save).call_all(
            [_contiguous(hidden_states), _contiguous(k), _contiguous(v), _contiguous(weight_fused), output, *saved])
    return (output, *saved) if save else (output, None, None, None, None)


def engram_gate_bwd(grad_out, hidden_states, k, v, weight_fused, dot, gate_score, rstd_x, rstd_k, clamp_value):
    """Engram gate backward for engram_gate_fwd's saved values. Returns (grad_hidden_states, grad_k,
    grad_v) in bf16 with their inputs' shapes, and grad_w_partial float32 [GATE_BWD_BLOCKS, hc_mult,
    hidden]: d loss / d weight_fused summed over each block's run of tokens (grad_w_reduce sums them)."""
    fn = "engram_gate_bwd"
    tokens, hc_mult, hidden = _gate_inputs(fn, hidden_states, k, v, weight_fused)
    A.require_array(fn, "grad_out", grad_out, ("bfloat16",), ndim=3)
    if tuple(grad_out.shape) != (tokens, hc_mult, hidden):
        raise A.invalid_argument(fn, "grad_out", f"must have hidden_states' shape {[tokens, hc_mult, hidden]}, got "
                                 f"{list(grad_out.shape)}")
    for name, t in (("dot", dot), ("gate_score", gate_score), ("rstd_x", rstd_x), ("rstd_k", rstd_k)):
        A.require_array(fn, name, t, ("float32",), ndim=2)
        if tuple(t.shape) != (tokens, hc_mult):
            raise A.invalid_argument(fn, name, f"must have shape {[tokens, hc_mult]}, got {list(t.shape)}")
    clamp_value = _require_float(fn, "clamp_value", clamp_value)
    A.check_same_kind(fn, grad_out=grad_out, hidden_states=hidden_states, k=k, v=v, weight_fused=weight_fused,
                      dot=dot, gate_score=gate_score, rstd_x=rstd_x, rstd_k=rstd_k)
    grad_x = A.alloc(hidden_states, (tokens, hc_mult, hidden), "bfloat16")
    grad_k = A.alloc(hidden_states, (tokens, hc_mult, hidden), "bfloat16")
    grad_v = A.alloc(hidden_states, (tokens, hidden), "bfloat16")
    grad_w = A.alloc(hidden_states, (GATE_BWD_BLOCKS, hc_mult, hidden), "float32", zero=True)
    if tokens and hc_mult and hidden:
        args = [_contiguous(a) for a in (grad_out, hidden_states, k, v, weight_fused, dot, gate_score, rstd_x, rstd_k)]
        K.engram_gate_bwd(hc_mult, hidden, clamp_value, GATE_BWD_BLOCKS).call_all(
            [*args, grad_x, grad_k, grad_v, grad_w])
    return grad_x, grad_k, grad_v, grad_w


def grad_w_reduce(grad_w_partial, weight_hidden, weight_embed, grad_weight_hidden, grad_weight_embed):
    """grad_weight_hidden += W * weight_embed and grad_weight_embed += W * weight_hidden in place, with
    W the sum of grad_w_partial ([blocks, hc_mult, hidden] float32) over its blocks, in order.
    weight_*: bf16 [hc_mult, hidden]; grad_weight_*: float32 [hc_mult, hidden], contiguous. Returns None."""
    fn = "grad_w_reduce"
    A.require_array(fn, "grad_w_partial", grad_w_partial, ("float32",), ndim=3)
    blocks, hc_mult, hidden = (int(d) for d in grad_w_partial.shape)
    for name, t, dt in (("weight_hidden", weight_hidden, "bfloat16"), ("weight_embed", weight_embed, "bfloat16"),
                        ("grad_weight_hidden", grad_weight_hidden, "float32"),
                        ("grad_weight_embed", grad_weight_embed, "float32")):
        A.require_array(fn, name, t, (dt,), ndim=2)
        if tuple(t.shape) != (hc_mult, hidden):
            raise A.invalid_argument(fn, name, f"must have shape {[hc_mult, hidden]}, got {list(t.shape)}")
    for name, t in (("grad_weight_hidden", grad_weight_hidden), ("grad_weight_embed", grad_weight_embed)):
        if not A.is_contiguous(t):
            raise A.invalid_argument(fn, name, "is updated in place and must be contiguous")
    A.check_same_kind(fn, grad_w_partial=grad_w_partial, weight_hidden=weight_hidden, weight_embed=weight_embed,
                      grad_weight_hidden=grad_weight_hidden, grad_weight_embed=grad_weight_embed)
    if blocks and hc_mult and hidden:
        K.engram_grad_w_reduce(blocks, hc_mult, hidden).call_all(
            [_contiguous(grad_w_partial), _contiguous(weight_hidden), _contiguous(weight_embed), grad_weight_hidden,
             grad_weight_embed])
