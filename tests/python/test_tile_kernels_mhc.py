"""tessera.tile_kernels.modeling.mhc.ops: expand_to_mhc, mhc_head_compute_mix, mhc_pre_apply_mix,
mhc_pre_norm_fn, mhc_pre_split_mixes, mhc_post and sinkhorn_normalize,
forward against float64 references (exact where the operation is a copy), backward through
torch.autograd against float64 gradients (torch's autograd of a float64 reference written here), odd
sizes, bitwise across thread counts; the functional layer and the multilayer recompute against the
operations they compose."""
import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera.tile_kernels.modeling import mhc
from tessera.tile_kernels.modeling.mhc import ops

torch = pytest.importorskip("torch")
BF16 = ml_dtypes.bfloat16


def sinkhorn64(x, repeat, eps):
    x = x - x.max(-1, keepdims=True)
    p = np.exp(x) / np.exp(x).sum(-1, keepdims=True) + eps
    p = p / (p.sum(-2, keepdims=True) + eps)
    for _ in range(repeat - 1):
        p = p / (p.sum(-1, keepdims=True) + eps)
        p = p / (p.sum(-2, keepdims=True) + eps)
    return p


def sinkhorn_torch64(x, repeat, eps):
    p = x.softmax(-1) + eps
    p = p / (p.sum(-2, keepdim=True) + eps)
    for _ in range(repeat - 1):
        p = p / (p.sum(-1, keepdim=True) + eps)
        p = p / (p.sum(-2, keepdim=True) + eps)
    return p


def same_bits(a, b):
    return np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


@pytest.mark.parametrize("shape", [(3, 5, 300), (7, 64)])
def test_expand_to_mhc_copies_and_sums_gradients(rng, shape):
    x = rng.standard_normal(shape).astype(BF16)
    out = ops.expand_to_mhc(x, 4)
    assert out.shape == (*shape[:-1], 4, shape[-1]) and all(same_bits(out[..., m, :], x) for m in range(4))
    xt = torch.from_numpy(x.view(np.uint16).astype(np.int16)).view(torch.bfloat16).requires_grad_()
    y = ops.expand_to_mhc(xt, 3)
    grad = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).bfloat16()
    y.backward(grad)
    want = grad.double().sum(-2)
    torch.testing.assert_close(xt.grad.double(), want, rtol=2 ** -7, atol=1e-2)
    poisoned = np.full((*shape[:-1], 2, shape[-1]), np.nan, BF16)
    assert ops.expand_to_mhc(x, 2, out=poisoned) is poisoned and same_bits(poisoned[..., 1, :], x)


def test_head_compute_mix_forward_and_gradients(rng):
    a, b, m = 5, 37, 4
    x = rng.standard_normal((a, b, m)).astype(np.float32)
    scale = rng.standard_normal(1).astype(np.float32)
    base = rng.standard_normal(m).astype(np.float32)
    got = ops.mhc_head_compute_mix(x, scale, base, 1e-2)
    want = 1 / (1 + np.exp(-(x.astype(np.float64) * scale[0] + base))) + 1e-2
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

    leaves = [torch.from_numpy(t).requires_grad_() for t in (x, scale, base)]
    out = ops.mhc_head_compute_mix(*leaves, 1e-2)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
    out.backward(g)
    refs = [torch.from_numpy(t).double().requires_grad_() for t in (x, scale, base)]
    (torch.sigmoid(refs[0] * refs[1] + refs[2]) + 1e-2).backward(g.double())
    for leaf, ref in zip(leaves, refs):
        torch.testing.assert_close(leaf.grad.double(), ref.grad, rtol=1e-4, atol=1e-5)
    first = [leaf.grad.clone() for leaf in leaves]
    saved = tessera.num_threads()
    tessera.set_num_threads(1)
    try:
        for leaf in leaves:
            leaf.grad = None
        ops.mhc_head_compute_mix(*leaves, 1e-2).backward(g)
    finally:
        tessera.set_num_threads(saved)
    assert all(same_bits(f.numpy(), leaf.grad.numpy()) for f, leaf in zip(first, leaves))


def test_pre_apply_mix_forward_and_gradients(rng):
    a, b, m, h = 3, 7, 4, 200
    x = rng.standard_normal((a, b, m, h)).astype(BF16)
    mix = rng.standard_normal((a, b, m, 1)).astype(np.float32)
    got = ops.mhc_pre_apply_mix(x, mix)
    want = (x.astype(np.float64) * mix).sum(-2)
    assert got.dtype == BF16 and got.shape == (a, b, h)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2 ** -8, atol=1e-2)
    xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).requires_grad_()
    mt = torch.from_numpy(mix).requires_grad_()
    out = ops.mhc_pre_apply_mix(xt, mt)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(4)).bfloat16()
    out.backward(g)
    xr = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    mr = torch.from_numpy(mix.astype(np.float64)).requires_grad_()
    (xr * mr).sum(-2).backward(g.double())
    torch.testing.assert_close(xt.grad.double(), xr.grad, rtol=2 ** -7, atol=1e-2)
    torch.testing.assert_close(mt.grad.double(), mr.grad, rtol=1e-4, atol=1e-3)


def test_pre_split_mixes_forward_and_gradients(rng):
    a, b, n = 3, 41, 4
    width = 2 * n + n * n
    x = rng.standard_normal((a, b, width)).astype(np.float32)
    scale = rng.standard_normal(3).astype(np.float32)
    base = rng.standard_normal(width).astype(np.float32)
    pre, post, comb = ops.mhc_pre_split_mixes(x, scale, base, n, 2.0, 1e-2)
    full = np.concatenate([np.repeat(scale[0], n), np.repeat(scale[1], n), np.repeat(scale[2], n * n)])
    z = x.astype(np.float64) * full + base
    sig = 1 / (1 + np.exp(-z))
    np.testing.assert_allclose(pre, (sig[..., :n] + 1e-2)[..., None], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(post, (sig[..., n:2 * n] * 2.0)[..., None], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(comb, z[..., 2 * n:].reshape(a, b, n, n), rtol=1e-6, atol=1e-6)

    leaves = [torch.from_numpy(t).requires_grad_() for t in (x, scale, base)]
    outs = ops.mhc_pre_split_mixes(*leaves, n, 2.0, 1e-2)
    gen = torch.Generator().manual_seed(5)
    grads = [torch.randn(o.shape, generator=gen) for o in outs]
    torch.autograd.backward(outs, grads)
    xr, sr, br = (torch.from_numpy(t).double().requires_grad_() for t in (x, scale, base))
    zr = xr * torch.cat([sr[0].expand(n), sr[1].expand(n), sr[2].expand(n * n)]) + br
    refs = ((zr[..., :n].sigmoid() + 1e-2).unsqueeze(-1), (zr[..., n:2 * n].sigmoid() * 2.0).unsqueeze(-1),
            zr[..., 2 * n:].view(a, b, n, n))
    torch.autograd.backward(refs, [g.double() for g in grads])
    for leaf, ref in zip(leaves, (xr, sr, br)):
        torch.testing.assert_close(leaf.grad.double(), ref.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("h", [300, 1100])
def test_post_forward_and_gradients(rng, h):
    a, b, n = 2, 5, 4
    x = rng.standard_normal((a, b, h)).astype(BF16)
    res = rng.standard_normal((a, b, n, h)).astype(BF16)
    post = rng.standard_normal((a, b, n, 1)).astype(np.float32)
    comb = rng.standard_normal((a, b, n, n)).astype(np.float32)
    got = ops.mhc_post(x, res, post, comb)
    want = x.astype(np.float64)[:, :, None, :] * post + np.einsum("abmn,abmc->abnc", comb, res.astype(np.float64))
    assert got.dtype == BF16 and got.shape == (a, b, n, h)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2 ** -8, atol=2e-2)

    def bf16_tensor(v):
        return torch.from_numpy(v.view(np.int16)).view(torch.bfloat16).requires_grad_()

    leaves = [bf16_tensor(x), bf16_tensor(res), torch.from_numpy(post).requires_grad_(),
              torch.from_numpy(comb).requires_grad_()]
    out = ops.mhc_post(*leaves)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(6)).bfloat16()
    out.backward(g)
    refs = [torch.from_numpy(v.astype(np.float64)).requires_grad_() for v in (x, res, post, comb)]
    (refs[0].unsqueeze(-2) * refs[2] + torch.einsum("abmn,abmc->abnc", refs[3], refs[1])).backward(g.double())
    for leaf, ref, tol in zip(leaves, refs, (2e-2, 2e-2, 1e-3, 1e-3)):
        torch.testing.assert_close(leaf.grad.double(), ref.grad, rtol=2 ** -7, atol=tol)


@pytest.mark.parametrize("with_weight", [False, True])
def test_pre_norm_fn_forward_and_gradients(rng, with_weight):
    a, b, n, h = 2, 19, 4, 72  # K = 288: a partial 256-wide step
    m3 = 2 * n + n * n
    x = rng.standard_normal((a, b, n, h)).astype(BF16)
    fn = rng.standard_normal((m3, n * h)).astype(np.float32) * 0.1
    normw = (rng.standard_normal(n * h) * 0.1 + 1).astype(np.float32) if with_weight else None
    got = ops.mhc_pre_norm_fn(x, fn, normw, 1e-6)
    xf = x.astype(np.float64).reshape(a, b, n * h)
    f64 = fn.astype(np.float64) * (normw if with_weight else 1.0)
    want = (xf @ f64.T) / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6)
    assert got.shape == (a, b, m3) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).requires_grad_()
    ft = torch.from_numpy(fn).requires_grad_()
    wt = torch.from_numpy(normw).requires_grad_() if with_weight else None
    out = ops.mhc_pre_norm_fn(xt, ft, wt, 1e-6)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    out.backward(g)
    xr = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    fr = torch.from_numpy(fn.astype(np.float64)).requires_grad_()
    wr = torch.from_numpy(normw.astype(np.float64)).requires_grad_() if with_weight else None
    flat = xr.reshape(a, b, n * h)
    fw = fr * wr if with_weight else fr
    ((flat @ fw.T) * torch.rsqrt(flat.square().mean(-1, keepdim=True) + 1e-6)).backward(g.double())
    torch.testing.assert_close(xt.grad.double(), xr.grad, rtol=2 ** -7, atol=1e-2)
    torch.testing.assert_close(ft.grad.double(), fr.grad, rtol=1e-4, atol=1e-3)
    if with_weight:
        torch.testing.assert_close(wt.grad.double(), wr.grad, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n,repeat", [(4, 10), (3, 1), (5, 4)])
def test_sinkhorn_forward_and_gradient(rng, n, repeat):
    x = (rng.standard_normal((2, 19, n, n)) * 2).astype(np.float32)
    got = ops.sinkhorn_normalize(x, repeat=repeat, eps=1e-6)
    np.testing.assert_allclose(got, sinkhorn64(x.astype(np.float64), repeat, 1e-6), rtol=2e-5, atol=1e-6)
    xt = torch.from_numpy(x).requires_grad_()
    y = ops.sinkhorn_normalize(xt, repeat, 1e-6)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(3))
    y.backward(g)
    ref = torch.from_numpy(x).double().requires_grad_()
    sinkhorn_torch64(ref, repeat, 1e-6).backward(g.double())
    torch.testing.assert_close(xt.grad.double(), ref.grad, rtol=1e-3, atol=2e-5)


def test_mhc_pre_and_head_compose_the_operations(rng):
    a, b, n, h = 2, 9, 4, 64
    m3 = 2 * n + n * n
    x = rng.standard_normal((a, b, n, h)).astype(BF16)
    fn = (rng.standard_normal((m3, n * h)) * 0.1).astype(np.float32)
    scale = rng.standard_normal(3).astype(np.float32)
    base = rng.standard_normal(m3).astype(np.float32)
    xt, ft, st, bt = (torch.from_numpy(v.view(np.int16)).view(torch.bfloat16) if v.dtype == BF16
                      else torch.from_numpy(v) for v in (x, fn, scale, base))
    with torch.no_grad():  # inference: mhc_pre_big_fuse
        fused_in, (fused_post, fused_comb) = mhc.mhc_pre(xt, ft, st, bt, post_mult_value=2.0)
    leaves = [t.clone().requires_grad_() for t in (xt, ft, st, bt)]
    layer_in, (post, comb) = mhc.mhc_pre(*leaves, post_mult_value=2.0)
    for u, v in ((fused_in, layer_in), (fused_post, post), (fused_comb, comb)):
        assert torch.equal(u.view(torch.int16) if u.dtype == torch.bfloat16 else u,
                           (v.view(torch.int16) if v.dtype == torch.bfloat16 else v).detach())
    # float64 composition of the references
    xf = x.astype(np.float64)
    flat = xf.reshape(a, b, n * h)
    mixes = (flat @ fn.astype(np.float64).T) / np.sqrt((flat * flat).mean(-1, keepdims=True) + 1e-6)
    full = np.concatenate([np.repeat(scale[0], n), np.repeat(scale[1], n), np.repeat(scale[2], n * n)])
    z = mixes * full + base
    pre = 1 / (1 + np.exp(-z[..., :n])) + 1e-6
    np.testing.assert_allclose(comb.detach().numpy(), sinkhorn64(z[..., 2 * n:].reshape(a, b, n, n), 10, 1e-6),
                               rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(layer_in.detach().float().numpy(), (xf * pre[..., None]).sum(-2), rtol=2 ** -7,
                               atol=2e-2)
    (layer_in.float().sum() + post.sum() + comb.sum()).backward()
    assert all(leaf.grad is not None and torch.isfinite(leaf.grad.float()).all() for leaf in leaves)
    head_fn = fn[:n]
    out = mhc.mhc_head(x, head_fn, scale[:1], base[:n])
    mix = 1 / (1 + np.exp(-((flat @ head_fn.astype(np.float64).T) / np.sqrt((flat * flat).mean(-1, keepdims=True)
                                                                              + 1e-6) * scale[0] + base[:n]))) + 1e-6
    np.testing.assert_allclose(out.astype(np.float64), (xf * mix[..., None]).sum(-2), rtol=2 ** -7, atol=2e-2)
    emb = np.ascontiguousarray(x[:, :, 0])
    np.testing.assert_array_equal(mhc.expand_from_embedding(emb, 3)[:, :, 2].view(np.int16), emb.view(np.int16))


@pytest.mark.parametrize("posts_short", [False, True])
def test_multilayer_recompute_matches_the_layer_by_layer_operations(rng, posts_short):
    a, b, n, h, layers = 2, 3, 4, 96, 3
    posts = layers - 1 if posts_short else layers
    res0 = rng.standard_normal((a, b, n, h)).astype(BF16)
    pre = [rng.standard_normal((a, b, n, 1)).astype(np.float32) for _ in range(layers)]
    outs = [rng.standard_normal((a, b, h)).astype(BF16) for _ in range(posts)]
    post = [rng.standard_normal((a, b, n, 1)).astype(np.float32) for _ in range(posts)]
    comb = [rng.standard_normal((a, b, n, n)).astype(np.float32) for _ in range(posts)]
    layer_in = [np.full((a, b, h), np.nan, BF16) for _ in range(layers)]
    residual = [np.full((a, b, n, h), np.nan, BF16) for _ in range(posts)]
    assert ops.mhc_multilayer_recompute(res0, pre, outs, post, comb, layer_in, residual) is None
    res = res0
    for layer in range(layers):  # the same steps, one operation at a time: the same bits
        assert same_bits(layer_in[layer], ops.mhc_pre_apply_mix(res, pre[layer]))
        if layer < posts:
            res = ops.mhc_post(outs[layer], res, post[layer], comb[layer])
            assert same_bits(residual[layer], res)
    with pytest.raises(tessera.InvalidArgumentError, match=r"mhc_multilayer_recompute: argument 'layer_output_list'"):
        ops.mhc_multilayer_recompute(res0, pre, outs[:1], post[:1], comb[:1], layer_in, residual[:1])


def test_errors():
    with pytest.raises(tessera.InvalidArgumentError, match=r"sinkhorn_normalize: argument 'x' must end in a square"):
        ops.sinkhorn_normalize(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(tessera.InvalidArgumentError, match=r"mhc_head_compute_mix: argument 'mhc_base' must have"):
        ops.mhc_head_compute_mix(np.zeros((1, 2, 4), np.float32), np.zeros(1, np.float32), np.zeros(3, np.float32),
                                 0.0)
    with pytest.raises(tessera.InvalidArgumentError, match=r"expand_to_mhc: argument 'out' must be"):
        ops.expand_to_mhc(np.zeros((2, 8), BF16), 2, out=np.zeros((2, 3, 8), BF16))
