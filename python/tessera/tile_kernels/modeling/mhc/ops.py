"""``tessera.tile_kernels.modeling.mhc.ops``: TileKernels' mhc operations, names and arguments as
there. Torch tensors go through ``torch.autograd.Function``s (forward and backward kernels in the tile
language); numpy arrays get the forward. Implemented: expand_to_mhc, mhc_head_compute_mix,
mhc_pre_apply_mix, mhc_pre_big_fuse, mhc_pre_norm_fn, mhc_pre_split_mixes, mhc_post (with mhc_post_fwd /
mhc_post_bwd), sinkhorn_normalize and mhc_multilayer_recompute."""
import functools
import numbers

import numpy as np

from ... import _arrays as A
from ... import _kernels_mhc as K

__all__ = ["expand_to_mhc", "mhc_head_compute_mix", "mhc_multilayer_recompute", "mhc_post", "mhc_post_bwd",
           "mhc_post_fwd", "mhc_pre_apply_mix", "mhc_pre_big_fuse", "mhc_pre_norm_fn", "mhc_pre_split_mixes",
           "sinkhorn_normalize"]


def _contiguous(x):
    return x if A.is_contiguous(x) else (x.contiguous() if hasattr(x, "contiguous") else np.ascontiguousarray(x))


def _needs_grad(*xs):
    return any(A.is_torch_tensor(x) and x.requires_grad for x in xs)


@functools.lru_cache(maxsize=None)
def _functions():
    """The autograd Functions by class name (built on first use: torch is optional)."""
    torch = A.torch_module()

    class ExpandToMHC(torch.autograd.Function):
        @staticmethod
        def forward(ctx, hidden, mhc_mult, out):
            return _expand(hidden.detach(), mhc_mult, out)

        @staticmethod
        def backward(ctx, o_grad):
            o_grad = _contiguous(o_grad)
            *lead, mhc_mult, h = o_grad.shape
            x_grad = torch.empty((*lead, h), dtype=o_grad.dtype)
            if x_grad.numel():
                K.expand_bwd(mhc_mult, h).call_all([o_grad.reshape(-1, mhc_mult, h), x_grad.view(-1, h)])
            return x_grad, None, None

    class HeadComputeMix(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input_mix, mhc_scale, mhc_base, eps):
            ctx.save_for_backward(input_mix, mhc_scale, mhc_base)
            return _head_mix(input_mix.detach(), mhc_scale.detach(), mhc_base.detach(), eps)

        @staticmethod
        def backward(ctx, grad):
            x, scale, base = (t.detach() for t in ctx.saved_tensors)
            mhc_mult = x.shape[-1]
            x_grad = torch.empty_like(x)
            scale_partial = torch.zeros((K.PARTIAL_BLOCKS, 1), dtype=torch.float32)
            base_partial = torch.zeros((K.PARTIAL_BLOCKS, mhc_mult), dtype=torch.float32)
            if x.numel():
                K.head_compute_mix_bwd(mhc_mult).call_all(
                    [_contiguous(grad).view(-1, mhc_mult), x.view(-1, mhc_mult), scale, base,
                     x_grad.view(-1, mhc_mult), scale_partial, base_partial])
            return x_grad, _rows_sum(scale_partial).view(scale.shape), _rows_sum(base_partial), None

    class Sinkhorn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, repeat, eps):
            ctx.save_for_backward(x)
            ctx.repeat, ctx.eps = repeat, eps
            return _sinkhorn(x.detach(), repeat, eps)

        @staticmethod
        def backward(ctx, grad):
            x = ctx.saved_tensors[0].detach()
            n = x.shape[-1]
            x_grad = torch.empty_like(x)
            if x.numel():
                K.sinkhorn(n, ctx.repeat, ctx.eps, True).call_all(
                    [_contiguous(grad).reshape(-1, n, n), x.reshape(-1, n, n), x_grad.view(-1, n, n)])
            return x_grad, None, None

    class PreApplyMix(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, mix, out):
            ctx.save_for_backward(x, mix)
            return _pre_apply_mix(x.detach(), mix.detach(), out)

        @staticmethod
        def backward(ctx, o_grad):
            x, mix = (t.detach() for t in ctx.saved_tensors)
            *_, mhc_mult, h = x.shape
            x_grad = torch.zeros_like(x)
            mix_grad = torch.empty(mix.shape, dtype=torch.float32)
            if x.numel():
                K.pre_apply_mix_bwd(mhc_mult, h).call_all(
                    [_contiguous(o_grad).reshape(-1, h), x.reshape(-1, mhc_mult, h), mix.reshape(-1, mhc_mult),
                     x_grad.view(-1, mhc_mult, h), mix_grad.view(-1, mhc_mult)])
            return x_grad, mix_grad, None

    class PreSplitMixes(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale, base, mhc_mult, post_mult, eps):
            ctx.save_for_backward(x, scale, base)
            ctx.mhc_mult, ctx.post_mult = mhc_mult, post_mult
            return _pre_split_mixes(x.detach(), scale.detach(), base.detach(), mhc_mult, post_mult, eps)

        @staticmethod
        def backward(ctx, pre_grad, post_grad, comb_grad):
            x, scale, base = (t.detach() for t in ctx.saved_tensors)
            n, width = ctx.mhc_mult, x.shape[-1]
            x_grad = torch.empty_like(x)
            scale_partial = torch.zeros((K.PARTIAL_BLOCKS, 3), dtype=torch.float32)
            base_partial = torch.zeros((K.PARTIAL_BLOCKS, width), dtype=torch.float32)
            grads = [torch.zeros(shape, dtype=torch.float32) if g is None else _contiguous(g)
                     for g, shape in ((pre_grad, (*x.shape[:-1], n, 1)), (post_grad, (*x.shape[:-1], n, 1)),
                                      (comb_grad, (*x.shape[:-1], n, n)))]
            if x.numel():
                K.pre_split_mixes_bwd(n, ctx.post_mult).call_all(
                    [grads[0].reshape(-1, n), grads[1].reshape(-1, n), grads[2].reshape(-1, n * n),
                     x.reshape(-1, width), scale, base, x_grad.view(-1, width), scale_partial, base_partial])
            return x_grad, _rows_sum(scale_partial), _rows_sum(base_partial), None, None, None

    class Post(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, residual, post, comb, out):
            ctx.save_for_backward(x, residual, post, comb)
            return mhc_post_fwd(x.detach(), residual.detach(), post.detach(), comb.detach(), out)

        @staticmethod
        def backward(ctx, d_o):
            return (*mhc_post_bwd(*(t.detach() for t in ctx.saved_tensors), d_o), None)

    class NormwMerge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, fn, normw):
            ctx.save_for_backward(fn, normw)
            out = torch.empty_like(fn)
            K.fn_normw_merge(*fn.shape).call_all([fn.detach(), normw.detach(), out])
            return out

        @staticmethod
        def backward(ctx, g):
            fn, normw = (t.detach() for t in ctx.saved_tensors)
            fn_grad, normw_grad = torch.empty_like(fn), torch.empty_like(normw)
            K.fn_normw_merge_bwd(*fn.shape).call_all([fn, normw, _contiguous(g), fn_grad, normw_grad])
            return fn_grad, normw_grad

    class PreNormFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, fn, eps):
            out, mul, sqrsum = _pre_norm_fn(x.detach(), fn.detach(), eps)
            ctx.save_for_backward(x, fn, mul, sqrsum)
            ctx.eps = eps
            return out

        @staticmethod
        def backward(ctx, g):
            x, fn, mul, sqrsum = (t.detach() for t in ctx.saved_tensors)
            mhc3, k_total = fn.shape
            x2 = x.reshape(-1, k_total)
            x_grad = torch.zeros_like(x)
            d_mul = torch.empty_like(mul)
            fn_grad = torch.empty_like(fn)
            if x2.shape[0]:
                K.pre_norm_fn_bwd_x(mhc3, k_total, ctx.eps).call_all(
                    [_contiguous(g).reshape(-1, mhc3), mul, sqrsum, x2, fn, x_grad.view(-1, k_total), d_mul])
                K.pre_norm_fn_bwd_fn(mhc3, k_total).call_all([d_mul, x2, fn_grad])
            else:
                fn_grad.zero_()
            return x_grad, fn_grad, None

    return {f.__name__: f for f in (ExpandToMHC, HeadComputeMix, Sinkhorn, PreApplyMix, PreSplitMixes, Post,
                                     NormwMerge, PreNormFn)}


def _rows_sum(partial):
    """The partial rows added in order (the same bits for any thread count)."""
    total = partial[0].clone()
    for row in partial[1:]:
        total += row
    return total


def _expand(hidden, mhc_mult, out):
    h = hidden.shape[-1]
    if out is None:
        out = A.alloc(hidden, (*hidden.shape[:-1], mhc_mult, h), "bfloat16")
    if out.size if isinstance(out, np.ndarray) else out.numel():
        K.expand_fwd(mhc_mult, h).call_all([hidden.reshape(-1, h), out.reshape(-1, mhc_mult, h)])
    return out


def expand_to_mhc(hidden, mhc_mult, out=None):
    """out[..., m, :] = hidden[..., :] for m < mhc_mult (bf16, hidden contiguous); the backward sums
    the mhc_mult copies' gradients in float32, in order."""
    fn = "expand_to_mhc"
    A.require_array(fn, "hidden", hidden, ("bfloat16",))
    mhc_mult = A.require_int(fn, "mhc_mult", mhc_mult, minimum=1)
    if hidden.ndim < 1 or not A.is_contiguous(hidden):
        raise A.invalid_argument(fn, "hidden", "must be a contiguous tensor with at least one dimension")
    want = (*hidden.shape[:-1], mhc_mult, hidden.shape[-1])
    if out is not None:
        A.require_array(fn, "out", out, ("bfloat16",))
        if tuple(out.shape) != want or not A.is_contiguous(out):
            raise A.invalid_argument(fn, "out", f"must be a contiguous tensor of shape {list(want)}, got "
                                     f"{list(out.shape)}")
        A.check_same_kind(fn, hidden=hidden, out=out)
    if _needs_grad(hidden):
        return _functions()["ExpandToMHC"].apply(hidden, mhc_mult, out)
    return _expand(hidden, mhc_mult, out)


def _head_mix(x, scale, base, eps):
    mhc_mult = x.shape[-1]
    out = A.alloc(x, x.shape, "float32")
    if np.prod(x.shape):
        K.head_compute_mix_fwd(mhc_mult, eps).call_all([x.reshape(-1, mhc_mult), scale, base,
                                                        out.reshape(-1, mhc_mult)])
    return out


def mhc_head_compute_mix(input_mix, mhc_scale, mhc_base, mhc_pre_eps):
    """sigmoid(input_mix * mhc_scale + mhc_base) + mhc_pre_eps: input_mix float32 [a, b, mhc_mult],
    mhc_scale float32 [1], mhc_base float32 [mhc_mult]. The backward gives all three gradients; the
    scale's and base's sums over tokens are added per block of tokens, then over the blocks in order."""
    fn = "mhc_head_compute_mix"
    A.require_array(fn, "input_mix", input_mix, ("float32",), ndim=3)
    mhc_mult = int(input_mix.shape[-1])
    A.require_array(fn, "mhc_scale", mhc_scale, ("float32",), ndim=1)
    A.require_array(fn, "mhc_base", mhc_base, ("float32",), ndim=1)
    if tuple(mhc_scale.shape) != (1,):
        raise A.invalid_argument(fn, "mhc_scale", f"must have shape [1], got {list(mhc_scale.shape)}")
    if tuple(mhc_base.shape) != (mhc_mult,):
        raise A.invalid_argument(fn, "mhc_base", f"must have shape [{mhc_mult}], got {list(mhc_base.shape)}")
    if isinstance(mhc_pre_eps, bool) or not isinstance(mhc_pre_eps, numbers.Real):
        raise A.ArgumentTypeError(f"{fn}: argument 'mhc_pre_eps' must be a float, got {type(mhc_pre_eps).__name__}")
    A.check_same_kind(fn, input_mix=input_mix, mhc_scale=mhc_scale, mhc_base=mhc_base)
    args = (_contiguous(input_mix), _contiguous(mhc_scale), _contiguous(mhc_base), float(mhc_pre_eps))
    if _needs_grad(input_mix, mhc_scale, mhc_base):
        return _functions()["HeadComputeMix"].apply(*args)
    return _head_mix(*args)


def _pre_apply_mix(x, mix, out):
    *_, mhc_mult, h = x.shape
    if out is None:
        out = A.alloc(x, (*x.shape[:-2], h), "bfloat16")
    if np.prod(x.shape):
        K.pre_apply_mix_fwd(mhc_mult, h).call_all([x.reshape(-1, mhc_mult, h), mix.reshape(-1, mhc_mult),
                                                   out.reshape(-1, h)])
    return out


def mhc_pre_apply_mix(x, mix, out=None):
    """out[..., :] = sum over m of mix[..., m, 0] * x[..., m, :], summed in float32 in m order and
    rounded to bf16: x bf16 [..., mhc_mult, hidden] (contiguous), mix float32 [..., mhc_mult, 1]. The
    backward gives x's gradient (mix times the output's gradient, bf16) and mix's (float32 sums over
    the hidden dimension)."""
    fn = "mhc_pre_apply_mix"
    A.require_array(fn, "x", x, ("bfloat16",))
    A.require_array(fn, "mix", mix, ("float32",), last_contiguous=False)
    if x.ndim < 2 or not A.is_contiguous(x):
        raise A.invalid_argument(fn, "x", "must be a contiguous tensor [..., mhc_mult, hidden]")
    lead, mhc_mult, h = tuple(x.shape[:-2]), int(x.shape[-2]), int(x.shape[-1])
    if tuple(mix.shape) != (*lead, mhc_mult, 1):
        raise A.invalid_argument(fn, "mix", f"must have shape {[*lead, mhc_mult, 1]}, got {list(mix.shape)}")
    if out is not None:
        A.require_array(fn, "out", out, ("bfloat16",))
        if tuple(out.shape) != (*lead, h) or not A.is_contiguous(out):
            raise A.invalid_argument(fn, "out", f"must be a contiguous tensor of shape {[*lead, h]}, got "
                                     f"{list(out.shape)}")
    A.check_same_kind(fn, x=x, mix=mix, out=out)
    mix = _contiguous(mix)
    if _needs_grad(x, mix):
        return _functions()["PreApplyMix"].apply(x, mix, out)
    return _pre_apply_mix(x, mix, out)


def _pre_split_mixes(x, scale, base, n, post_mult, eps):
    lead, width = tuple(x.shape[:-1]), x.shape[-1]
    pre = A.alloc(x, (*lead, n, 1), "float32")
    post = A.alloc(x, (*lead, n, 1), "float32")
    comb = A.alloc(x, (*lead, n, n), "float32")
    if np.prod(x.shape):
        K.pre_split_mixes_fwd(n, post_mult, eps).call_all(
            [x.reshape(-1, width), scale, base, pre.reshape(-1, n), post.reshape(-1, n), comb.reshape(-1, n * n)])
    return pre, post, comb


def mhc_pre_split_mixes(input_mixes, mhc_scale, mhc_base, mhc_mult, mhc_post_mult_value, mhc_pre_eps):
    """The three mixes of a token from its 2n + n^2 inputs (n = mhc_mult): z = input_mixes *
    mhc_scale[segment] + mhc_base (segments n, n, n^2); returns pre = sigmoid(z) + mhc_pre_eps and
    post = sigmoid(z) * mhc_post_mult_value, both [a, b, n, 1], and comb = z as [a, b, n, n] (float32).
    input_mixes float32 [a, b, 2n + n^2], mhc_scale [3], mhc_base [2n + n^2]. The backward gives the
    three inputs' gradients (scale and base summed per block of tokens, then the blocks in order)."""
    fn = "mhc_pre_split_mixes"
    A.require_array(fn, "input_mixes", input_mixes, ("float32",), ndim=3)
    n = A.require_int(fn, "mhc_mult", mhc_mult, minimum=1)
    width = 2 * n + n * n
    if input_mixes.shape[-1] != width:
        raise A.invalid_argument(fn, "input_mixes", f"must have 2 * mhc_mult + mhc_mult^2 = {width} mixes in its last "
                                 f"dimension, got shape {list(input_mixes.shape)}")
    A.require_array(fn, "mhc_scale", mhc_scale, ("float32",), ndim=1)
    A.require_array(fn, "mhc_base", mhc_base, ("float32",), ndim=1)
    if tuple(mhc_scale.shape) != (3,):
        raise A.invalid_argument(fn, "mhc_scale", f"must have shape [3], got {list(mhc_scale.shape)}")
    if tuple(mhc_base.shape) != (width,):
        raise A.invalid_argument(fn, "mhc_base", f"must have shape [{width}], got {list(mhc_base.shape)}")
    for arg, v in (("mhc_post_mult_value", mhc_post_mult_value), ("mhc_pre_eps", mhc_pre_eps)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise A.ArgumentTypeError(f"{fn}: argument '{arg}' must be a float, got {type(v).__name__}")
    A.check_same_kind(fn, input_mixes=input_mixes, mhc_scale=mhc_scale, mhc_base=mhc_base)
    args = (_contiguous(input_mixes), _contiguous(mhc_scale), _contiguous(mhc_base), n, float(mhc_post_mult_value),
            float(mhc_pre_eps))
    if _needs_grad(*args[:3]):
        return _functions()["PreSplitMixes"].apply(*args)
    return _pre_split_mixes(*args)


def _post_args(fn, x, residual, post_layer_mix, comb_res_mix):
    A.require_array(fn, "residual", residual, ("bfloat16",), ndim=4)
    a, b, n, h = (int(d) for d in residual.shape)
    for arg, t, dt, shape in (("x", x, "bfloat16", (a, b, h)), ("post_layer_mix", post_layer_mix, "float32", (a, b, n, 1)),
                              ("comb_res_mix", comb_res_mix, "float32", (a, b, n, n))):
        A.require_array(fn, arg, t, (dt,), last_contiguous=False)
        if tuple(t.shape) != shape:
            raise A.invalid_argument(fn, arg, f"must have shape {list(shape)}, got {list(t.shape)}")
    A.check_same_kind(fn, x=x, residual=residual, post_layer_mix=post_layer_mix, comb_res_mix=comb_res_mix)
    return (a, b, n, h), [_contiguous(t) for t in (x, residual, post_layer_mix, comb_res_mix)]


def mhc_post_fwd(x, residual, post_layer_mix, comb_res_mix, out=None):
    """out[a, b, n, :] = x[a, b, :] * post_layer_mix[a, b, n, 0] + sum over m of comb_res_mix[a, b, m, n] *
    residual[a, b, m, :], in float32 (x's term first, then m in order), rounded to bf16. x bf16 [a, b, h],
    residual bf16 [a, b, mhc, h], post_layer_mix float32 [a, b, mhc, 1], comb_res_mix float32
    [a, b, mhc, mhc]."""
    fn = "mhc_post_fwd"
    (a, b, n, h), (x, residual, post, comb) = _post_args(fn, x, residual, post_layer_mix, comb_res_mix)
    if out is None:
        out = A.alloc(residual, (a, b, n, h), "bfloat16")
    else:
        A.require_array(fn, "out", out, ("bfloat16",))
        if tuple(out.shape) != (a, b, n, h) or not A.is_contiguous(out):
            raise A.invalid_argument(fn, "out", f"must be a contiguous tensor of shape {[a, b, n, h]}")
    if a * b * n * h:
        K.post_fwd(n, h).call_all([x.reshape(-1, h), residual.reshape(-1, n, h), post.reshape(-1, n),
                                   comb.reshape(-1, n, n), out.reshape(-1, n, h)])
    return out


def mhc_post_bwd(x, residual, post_layer_mix, comb_res_mix, d_o, fuse_grad_acc=True):
    """The gradients of mhc_post_fwd for d_o (bf16 [a, b, mhc, h]): (d_x bf16, d_residual bf16, d_post_layer_mix
    float32, d_comb_res_mix float32), shaped as their inputs. ``fuse_grad_acc`` (TileKernels hands
    d_residual to mhc_pre_apply_mix's backward through the residual's storage) has no effect: the
    gradients are returned and autograd adds them."""
    fn = "mhc_post_bwd"
    (a, b, n, h), (x, residual, post, comb) = _post_args(fn, x, residual, post_layer_mix, comb_res_mix)
    A.require_array(fn, "d_o", d_o, ("bfloat16",), last_contiguous=False)
    if tuple(d_o.shape) != (a, b, n, h):
        raise A.invalid_argument(fn, "d_o", f"must have shape {[a, b, n, h]}, got {list(d_o.shape)}")
    d_x = A.alloc(residual, (a, b, h), "bfloat16")
    d_res = A.alloc(residual, (a, b, n, h), "bfloat16")
    d_post = A.alloc(residual, (a, b, n, 1), "float32")
    d_comb = A.alloc(residual, (a, b, n, n), "float32")
    if a * b * n * h:
        K.post_bwd(n, h).call_all([_contiguous(d_o).reshape(-1, n, h), x.reshape(-1, h), residual.reshape(-1, n, h),
                                   post.reshape(-1, n), comb.reshape(-1, n, n), d_x.reshape(-1, h),
                                   d_res.reshape(-1, n, h), d_post.reshape(-1, n), d_comb.reshape(-1, n, n)])
    return d_x, d_res, d_post, d_comb


def mhc_post(x, residual, post_layer_mix, comb_res_mix, out=None):
    """mhc_post_fwd, with mhc_post_bwd as its backward for torch tensors that need gradients."""
    if _needs_grad(x, residual, post_layer_mix, comb_res_mix):
        _post_args("mhc_post", x, residual, post_layer_mix, comb_res_mix)
        return _functions()["Post"].apply(x, residual, post_layer_mix, comb_res_mix, out)
    return mhc_post_fwd(x, residual, post_layer_mix, comb_res_mix, out)


def _pre_norm_fn(x, fn, eps):
    mhc3, k_total = fn.shape
    lead = tuple(x.shape[:-2])
    x2 = x.reshape(-1, k_total)
    out = A.alloc(x, (*lead, mhc3), "float32")
    mul = A.alloc(x, (x2.shape[0], mhc3), "float32")
    sqrsum = A.alloc(x, (x2.shape[0],), "float32")
    if x2.shape[0]:
        K.pre_norm_fn_fwd(mhc3, k_total, eps).call_all([x2, fn, out.reshape(-1, mhc3), mul, sqrsum])
    return out, mul, sqrsum


def mhc_pre_norm_fn(residual, mhc_fn, mhc_norm_weight, mhc_norm_eps, fuse_grad_acc=True, n_splits=16):
    """The mixes of each token from its RMS-normalised residual: out[..., n] = (x . fn[n]) *
    rsqrt(mean(x^2) + mhc_norm_eps) with x = residual[...] flattened over (mhc_mult, hidden) and
    fn = mhc_fn * mhc_norm_weight (when given). residual bf16 [..., mhc_mult, hidden] (contiguous),
    mhc_fn float32 [mhc_mult3, mhc_mult * hidden], mhc_norm_weight float32 [mhc_mult * hidden] or None;
    out float32 [..., mhc_mult3]. Sums in float32 (TileKernels rounds fn to TF32 for its tensor cores;
    here it stays float32). ``fuse_grad_acc`` and ``n_splits`` (GPU scheduling) have no effect."""
    fn_name = "mhc_pre_norm_fn"
    A.require_array(fn_name, "residual", residual, ("bfloat16",))
    if residual.ndim < 2 or not A.is_contiguous(residual):
        raise A.invalid_argument(fn_name, "residual", "must be a contiguous tensor [..., mhc_mult, hidden]")
    k_total = int(residual.shape[-1]) * int(residual.shape[-2])
    A.require_array(fn_name, "mhc_fn", mhc_fn, ("float32",), ndim=2)
    if mhc_fn.shape[1] != k_total:
        raise A.invalid_argument(fn_name, "mhc_fn", f"must have shape [mhc_mult3, {k_total}] (mhc_mult * hidden), got "
                                 f"{list(mhc_fn.shape)}")
    if mhc_norm_weight is not None:
        A.require_array(fn_name, "mhc_norm_weight", mhc_norm_weight, ("float32",), ndim=1)
        if tuple(mhc_norm_weight.shape) != (k_total,):
            raise A.invalid_argument(fn_name, "mhc_norm_weight", f"must have shape [{k_total}], got "
                                     f"{list(mhc_norm_weight.shape)}")
    if isinstance(mhc_norm_eps, bool) or not isinstance(mhc_norm_eps, numbers.Real):
        raise A.ArgumentTypeError(f"{fn_name}: argument 'mhc_norm_eps' must be a float, got "
                                  f"{type(mhc_norm_eps).__name__}")
    A.check_same_kind(fn_name, residual=residual, mhc_fn=mhc_fn, mhc_norm_weight=mhc_norm_weight)
    eps = float(mhc_norm_eps)
    fn = _contiguous(mhc_fn)
    if _needs_grad(residual, mhc_fn, mhc_norm_weight):
        functions = _functions()
        if mhc_norm_weight is not None:
            fn = functions["NormwMerge"].apply(fn, _contiguous(mhc_norm_weight))
        return functions["PreNormFn"].apply(residual, fn, eps)
    if mhc_norm_weight is not None:
        merged = A.alloc(fn, fn.shape, "float32")
        K.fn_normw_merge(*fn.shape).call_all([fn, _contiguous(mhc_norm_weight), merged])
        fn = merged
    return _pre_norm_fn(residual, fn, eps)[0]


def mhc_pre_big_fuse(residual, fn, mhc_scale, mhc_base, rms_eps, mhc_pre_eps, mhc_sinkhorn_eps, mhc_post_mult_value,
                     sinkhorn_repeat, n_splits=16):
    """The inference path of an mhc pre step, TileKernels' fused kernel: mixes = mhc_pre_norm_fn(residual,
    fn, None, rms_eps), (pre, post, comb) = mhc_pre_split_mixes(...), comb = sinkhorn_normalize(comb),
    layer_input = mhc_pre_apply_mix(residual, pre). Returns (post [..., mhc, 1], comb [..., mhc, mhc],
    layer_input bf16 [..., hidden]). Here the steps run as the separate forward kernels, without
    gradients."""
    def forward(t):
        return t.detach() if A.is_torch_tensor(t) else t

    residual, fn, mhc_scale, mhc_base = (forward(t) for t in (residual, fn, mhc_scale, mhc_base))
    A.require_array("mhc_pre_big_fuse", "residual", residual, ("bfloat16",))
    if residual.ndim < 2:
        raise A.invalid_argument("mhc_pre_big_fuse", "residual", "must be a tensor [..., mhc_mult, hidden]")
    n = int(residual.shape[-2])
    mixes = mhc_pre_norm_fn(residual, fn, None, rms_eps, n_splits=n_splits)
    pre, post, comb = mhc_pre_split_mixes(mixes, mhc_scale, mhc_base, n, mhc_post_mult_value, mhc_pre_eps)
    comb = sinkhorn_normalize(comb, repeat=sinkhorn_repeat, eps=mhc_sinkhorn_eps)
    return post, comb, mhc_pre_apply_mix(residual, pre)


def mhc_multilayer_recompute(initial_residual, pre_mix_list, layer_output_list, post_mix_list, comb_mix_list,
                             layer_input_list, residual_list):
    """Recomputes the mhc streams of consecutive layers from the first residual (activation
    checkpointing): with res = initial_residual, for each layer l, layer_input_list[l] =
    mhc_pre_apply_mix(res, pre_mix_list[l]) and, while there is a post step (len(layer_output_list) is
    the number of layers or one fewer), residual_list[l] = res = mhc_post_fwd(layer_output_list[l], res,
    post_mix_list[l], comb_mix_list[l]). The outputs are written in place (contiguous); the sums are
    those of mhc_pre_apply_mix and mhc_post_fwd, so the bits are theirs. Returns None. (TileKernels fuses
    the layers into one kernel over pointer tables; here each layer's two kernels run in turn.)"""
    fn = "mhc_multilayer_recompute"
    lists = {"pre_mix_list": pre_mix_list, "layer_output_list": layer_output_list, "post_mix_list": post_mix_list,
             "comb_mix_list": comb_mix_list, "layer_input_list": layer_input_list, "residual_list": residual_list}
    for arg, v in lists.items():
        if not isinstance(v, (list, tuple)):
            raise A.ArgumentTypeError(f"{fn}: argument '{arg}' must be a list of tensors, got {type(v).__name__}")
    layers, posts = len(pre_mix_list), len(layer_output_list)
    if layers == 0 or len(layer_input_list) != layers:
        raise A.invalid_argument(fn, "layer_input_list", f"must have one tensor per layer ({layers}, >= 1), got "
                                 f"{len(layer_input_list)}")
    if posts not in (layers, layers - 1) or not len(post_mix_list) == len(comb_mix_list) == len(residual_list) == posts:
        raise A.invalid_argument(fn, "layer_output_list", f"the post lists (layer_output, post_mix, comb_mix, residual) "
                                 f"must all have num_layers ({layers}) or num_layers - 1 tensors, got {posts}, "
                                 f"{len(post_mix_list)}, {len(comb_mix_list)}, {len(residual_list)}")
    A.require_array(fn, "initial_residual", initial_residual, ("bfloat16",))
    if initial_residual.ndim < 2:
        raise A.invalid_argument(fn, "initial_residual", "must be a tensor [..., mhc_mult, hidden]")
    lead, n, h = tuple(initial_residual.shape[:-2]), int(initial_residual.shape[-2]), int(initial_residual.shape[-1])
    tokens = int(np.prod(lead))
    specs = {"pre_mix_list": ("float32", n), "layer_output_list": ("bfloat16", h), "post_mix_list": ("float32", n),
             "comb_mix_list": ("float32", n * n), "layer_input_list": ("bfloat16", h),
             "residual_list": ("bfloat16", n * h)}
    for arg, v in lists.items():
        dtype, per_token = specs[arg]
        for i, t in enumerate(v):
            A.require_array(fn, f"{arg}[{i}]", t, (dtype,))
            if int(np.prod(t.shape)) != tokens * per_token or not A.is_contiguous(t):
                raise A.invalid_argument(fn, f"{arg}[{i}]", f"must be a contiguous tensor of {tokens} x {per_token} "
                                         f"elements, got shape {list(t.shape)}")
            A.check_same_kind(fn, initial_residual=initial_residual, **{f"{arg}[{i}]": t})
    if not tokens * n * h:
        return None
    res = _contiguous(initial_residual).reshape(tokens, n, h)
    for layer in range(layers):
        K.pre_apply_mix_fwd(n, h).call_all([res, pre_mix_list[layer].reshape(tokens, n),
                                            layer_input_list[layer].reshape(tokens, h)])
        if layer < posts:
            out = residual_list[layer].reshape(tokens, n, h)
            K.post_fwd(n, h).call_all([layer_output_list[layer].reshape(tokens, h), res,
                                       post_mix_list[layer].reshape(tokens, n), comb_mix_list[layer].reshape(tokens, n, n),
                                       out])
            res = out
    return None


def _sinkhorn(x, repeat, eps):
    n = x.shape[-1]
    out = A.alloc(x, x.shape, "float32")
    if np.prod(x.shape):
        K.sinkhorn(n, repeat, eps, False).call_all([x.reshape(-1, n, n), out.reshape(-1, n, n)])
    return out


def sinkhorn_normalize(x, repeat=10, eps=1e-6):
    """Sinkhorn normalisation of the last two dimensions (float32 [..., n, n]): softmax over the last
    dimension plus eps, a column normalisation, then repeat - 1 rounds of row and column
    normalisations, each dividing by (sum + eps); TileKernels' sinkhorn_normalize_ref."""
    fn = "sinkhorn_normalize"
    A.require_array(fn, "x", x, ("float32",))
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise A.invalid_argument(fn, "x", f"must end in a square matrix [..., n, n], got shape {list(x.shape)}")
    repeat = A.require_int(fn, "repeat", repeat, minimum=1)
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise A.ArgumentTypeError(f"{fn}: argument 'eps' must be a float, got {type(eps).__name__}")
    x = _contiguous(x)
    if _needs_grad(x):
        return _functions()["Sinkhorn"].apply(x, repeat, float(eps))
    return _sinkhorn(x, repeat, float(eps))
