"""``tessera.tile_kernels.modeling.engram``: TileKernels' autograd wrapper of the Engram gate
(``engram_gate``, ``EngramGateFn``) over tessera.tile_kernels.engram's kernels. Needs torch."""
from ...engram import engram_gate_bwd, engram_gate_fwd, fused_weight, grad_w_reduce

try:
    import torch as _torch
except ImportError as e:  # TileKernels' wrapper is a torch.autograd.Function
    raise ImportError("tessera.tile_kernels.modeling.engram needs torch (pip install torch)") from e

__all__ = ["EngramGateFn", "engram_gate"]


class EngramGateFn(_torch.autograd.Function):
    """output = hidden_states + sigmoid(signed_sqrt(RMSNorm(x, wh) . RMSNorm(k, we) / sqrt(H))) * v with
    the clamp of engram_gate_fwd. hidden_states, k: bf16 [..., hc_mult, H]; v: bf16 [..., H];
    weight_hidden, weight_embed: bf16 [hc_mult, H]. The weights' gradients are float32 (added into
    ``main_grad`` instead, and None returned, when the weight has one, as TileKernels does)."""

    @staticmethod
    def forward(ctx, hidden_states, k, v, weight_hidden, weight_embed, clamp_value, eps):
        shape = hidden_states.shape
        hc_mult, hidden = shape[-2], shape[-1]
        x = hidden_states.detach().reshape(-1, hc_mult, hidden)
        k = k.detach().reshape(-1, hc_mult, hidden)
        v = v.detach().reshape(-1, hidden)
        w = fused_weight(weight_hidden.detach(), weight_embed.detach())
        output, dot, gate, rstd_x, rstd_k = engram_gate_fwd(x, k, v, w, eps, clamp_value)
        ctx.save_for_backward(x, k, v, weight_hidden, weight_embed, w, dot, gate, rstd_x, rstd_k)
        ctx.clamp_value, ctx.shape = clamp_value, shape
        return output.view(shape)

    @staticmethod
    def backward(ctx, grad_output):
        x, k, v, wh, we, w, dot, gate, rstd_x, rstd_k = ctx.saved_tensors
        shape = ctx.shape
        hc_mult, hidden = shape[-2], shape[-1]
        grad_x, grad_k, grad_v, partial = engram_gate_bwd(grad_output.contiguous().view(-1, hc_mult, hidden), x, k, v,
                                                          w, dot, gate, rstd_x, rstd_k, ctx.clamp_value)
        main_wh, main_we = getattr(wh, "main_grad", None), getattr(we, "main_grad", None)
        grad_wh = main_wh if main_wh is not None else _torch.zeros(wh.shape, dtype=_torch.float32)
        grad_we = main_we if main_we is not None else _torch.zeros(we.shape, dtype=_torch.float32)
        grad_w_reduce(partial, wh.detach(), we.detach(), grad_wh, grad_we)
        return (grad_x.view(shape), grad_k.view(shape), grad_v.view(*shape[:-2], hidden),
                None if main_wh is not None else grad_wh, None if main_we is not None else grad_we, None, None)


engram_gate = EngramGateFn.apply
