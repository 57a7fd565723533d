"""``tessera.tile_kernels.modeling.mhc.functional``: TileKernels' mhc layer entry points, composed
from the operations in ``ops`` (so their gradients flow through torch.autograd)."""
import numpy as np

from ... import _arrays as A
from . import ops

__all__ = ["expand_from_embedding", "mhc_head", "mhc_pre"]


def expand_from_embedding(x, mhc_mult=4):
    """An embedding [..., hidden] as the mhc residual [..., mhc_mult, hidden] (expand_to_mhc)."""
    return ops.expand_to_mhc(x, mhc_mult)


def _grad_enabled(x):
    return A.is_torch_tensor(x) and A.torch_module().is_grad_enabled()


def mhc_pre(residual, fn, scale, base, *, norm_weight=None, norm_eps=1e-6, mhc_mult=4, post_mult_value=1.0,
            pre_eps=1e-6, sinkhorn_eps=1e-6, sinkhorn_repeat=10, n_splits=16):
    """One sublayer's mhc pre-processing: mixes = mhc_pre_norm_fn(residual, fn, norm_weight),
    (pre, post, comb) = mhc_pre_split_mixes(mixes, scale, base), comb = sinkhorn_normalize(comb),
    layer_input = mhc_pre_apply_mix(residual, pre). Returns (layer_input, (post, comb)) for mhc_post.
    Without gradients (numpy, or torch with grad disabled) it is mhc_pre_big_fuse, as TileKernels
    does (which, like TileKernels' fused kernel, takes no norm_weight)."""
    if not _grad_enabled(residual):
        post, comb, layer_input = ops.mhc_pre_big_fuse(
            residual, fn, scale, base, rms_eps=norm_eps, mhc_pre_eps=pre_eps, mhc_sinkhorn_eps=sinkhorn_eps,
            mhc_post_mult_value=post_mult_value, sinkhorn_repeat=sinkhorn_repeat, n_splits=n_splits)
        return layer_input, (post, comb)
    mixes = ops.mhc_pre_norm_fn(residual, fn, norm_weight, norm_eps, n_splits=n_splits)
    pre, post, comb = ops.mhc_pre_split_mixes(mixes, scale, base, mhc_mult, post_mult_value, pre_eps)
    comb = ops.sinkhorn_normalize(comb, repeat=sinkhorn_repeat, eps=sinkhorn_eps)
    return ops.mhc_pre_apply_mix(residual, pre), (post, comb)


def mhc_head(residual, fn, scale, base, *, norm_weight=None, norm_eps=1e-6, mhc_mult=4, pre_eps=1e-6, n_splits=16):
    """The mhc head before the LM head: fn [mhc_mult, mhc_mult * hidden] padded with zero rows to
    mhc_mult * (mhc_mult + 2), mixes = mhc_pre_norm_fn(...)[..., :mhc_mult],
    mix = mhc_head_compute_mix(mixes, scale, base, pre_eps), and mhc_pre_apply_mix(residual, mix)."""
    rows = mhc_mult * (2 + mhc_mult)
    if fn.shape[0] < rows:
        pad = rows - fn.shape[0]
        if A.is_torch_tensor(fn):
            fn = A.torch_module().nn.functional.pad(fn, (0, 0, 0, pad))
        else:
            fn = np.concatenate([fn, np.zeros((pad, fn.shape[1]), fn.dtype)])
    mixes = ops.mhc_pre_norm_fn(residual, fn, norm_weight, norm_eps, n_splits=n_splits)[..., :mhc_mult]
    if np.prod(scale.shape) == 1:
        scale = scale.reshape(1)
    mix = ops.mhc_head_compute_mix(mixes, scale, base, pre_eps)
    return ops.mhc_pre_apply_mix(residual, mix[..., None])
