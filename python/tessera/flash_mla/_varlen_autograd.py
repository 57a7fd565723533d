"""Autograd for ``flash_attn_varlen_func``: a ``torch.autograd.Function`` whose backward is tessera's
``flash_attn_varlen_bwd`` (FlashAttention-2's backward, recomputing P from the saved lse).

Used only when torch tensors come in with grad mode on and one of q, k, v requiring grad; numpy arrays
and plain tensors keep the forward-only path. tessera never imports torch itself, so the Function class
is built on first use.
"""
from .. import _C
from .._arrays import optional_ref, to_ref, torch_module

_FUNCTION = None


def needs_grad(*tensors) -> bool:
    torch = torch_module()
    return (torch is not None and torch.is_grad_enabled()
            and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors))


def varlen_backward(q, k, v, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo, max_seqlen_kv, softmax_scale, causal,
                    out, lse, dout, dlse=None):
    """``(dq, dk, dv)`` (torch tensors in q's dtype) for the gradients dout of out and dlse of lse."""
    fn = "flash_attn_varlen_bwd"
    torch = torch_module()
    dq = torch.empty(tuple(q.shape), dtype=q.dtype)
    dk = torch.empty(tuple(k.shape), dtype=q.dtype)
    dv = torch.empty(tuple(v.shape), dtype=q.dtype)
    _C.flash_attn_varlen_bwd(
        to_ref(q, fn, "q"), to_ref(k, fn, "k"), to_ref(v, fn, "v"), to_ref(cu_seqlens_qo, fn, "cu_seqlens_qo"),
        to_ref(cu_seqlens_kv, fn, "cu_seqlens_kv"), int(max_seqlen_qo), int(max_seqlen_kv),
        None if softmax_scale is None else float(softmax_scale), bool(causal), to_ref(out, fn, "out"),
        to_ref(lse, fn, "lse"), to_ref(dout, fn, "dout"), optional_ref(dlse, fn, "dlse"),
        to_ref(dq, fn, "dq", writable=True), to_ref(dk, fn, "dk", writable=True), to_ref(dv, fn, "dv", writable=True))
    return dq, dk, dv


def _function(torch):
    global _FUNCTION
    if _FUNCTION is not None:
        return _FUNCTION

    class FlashAttnVarlenFunc(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo, max_seqlen_kv, causal,
                    softmax_scale, forward):
            out, lse = forward(q, k, v)  # grad mode is off here: the plain forward
            ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_qo, cu_seqlens_kv)
            ctx.args = (max_seqlen_qo, max_seqlen_kv, softmax_scale, causal)
            return out, lse

        @staticmethod
        def backward(ctx, dout, dlse):
            q, k, v, out, lse, cu_q, cu_kv = ctx.saved_tensors
            max_q, max_kv, scale, causal = ctx.args
            # lse's gradient joins the same pass (delta -= dlse); torch hands zeros when lse is unused.
            dq, dk, dv = varlen_backward(q, k, v, cu_q, cu_kv, max_q, max_kv, scale, causal, out, lse,
                                         dout, dlse.float() if dlse is not None else None)
            return dq, dk, dv, None, None, None, None, None, None, None

    _FUNCTION = FlashAttnVarlenFunc
    return _FUNCTION


def apply(q, k, v, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo, max_seqlen_kv, causal, softmax_scale, forward):
    """``(out, lse)`` with an autograd graph back to q, k and v; ``forward(q, k, v)`` is the plain forward."""
    return _function(torch_module()).apply(q, k, v, cu_seqlens_qo, cu_seqlens_kv, max_seqlen_qo, max_seqlen_kv,
                                           causal, softmax_scale, forward)
