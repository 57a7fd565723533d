"""tessera.tile_kernels.engram: engram_hash exact against Python integers, fused_weight exact, the gate
forward and backward against float64 references (the backward also against finite differences of
the float64 forward), grad_w_reduce exact against an in-order float32 sum, determinism."""
import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera.tile_kernels import engram as E


def test_engram_hash_exact(rng):
    tokens, max_ngram, layers, tables = 77, 4, 2, 3
    ids = rng.integers(0, 150000, size=(tokens, max_ngram)).astype(np.int32)
    mult = rng.integers(1, 2 ** 40, size=(layers, max_ngram)).astype(np.int64)
    vocab = rng.integers(1000, 500000, size=(layers, max_ngram - 1, tables)).astype(np.int32)
    offsets = rng.integers(0, 10 ** 6, size=(layers, (max_ngram - 1) * tables)).astype(np.int32)
    got = E.engram_hash(ids, mult, vocab, offsets)
    want = np.zeros_like(got)
    for layer in range(layers):
        for t in range(tokens):
            h = 0
            for n in range(max_ngram):
                prod = int(np.int64(ids[t, n]) * mult[layer, n])  # int64 product (wraps like the kernel)
                h = prod if n == 0 else h ^ prod
                if n:
                    for e in range(tables):
                        want[layer, t, (n - 1) * tables + e] = h % int(vocab[layer, n - 1, e]) \
                            + offsets[layer, (n - 1) * tables + e]
    assert got.dtype == np.int32 and np.array_equal(got, want)


def test_fused_weight(rng):
    wh = rng.standard_normal((4, 200)).astype(ml_dtypes.bfloat16)
    we = rng.standard_normal((4, 200)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(E.fused_weight(wh, we), wh.astype(np.float32) * we.astype(np.float32))


def test_errors():
    with pytest.raises(tessera.InvalidArgumentError, match=r"engram_hash: argument 'vocab_sizes' must be positive"):
        E.engram_hash(np.zeros((2, 3), np.int32), np.ones((1, 3), np.int64), np.zeros((1, 2, 1), np.int32),
                      np.zeros((1, 2), np.int32))
    x = np.zeros((3, 2, 64), BF16)
    with pytest.raises(tessera.InvalidArgumentError, match=r"engram_gate_fwd: argument 'v' must have shape \[3, 64\]"):
        E.engram_gate_fwd(x, x, np.zeros((3, 32), BF16), np.zeros((2, 64), np.float32), 1e-6, 1e-6)
    with pytest.raises(tessera.InvalidArgumentError, match=r"engram_gate_fwd: argument 'weight_fused' must have dtype"):
        E.engram_gate_fwd(x, x, np.zeros((3, 64), BF16), np.zeros((2, 64), BF16), 1e-6, 1e-6)
    g = np.zeros((2, 64), np.float32)
    with pytest.raises(tessera.InvalidArgumentError, match=r"grad_w_reduce: argument 'grad_weight_embed' is updated"):
        E.grad_w_reduce(np.zeros((4, 2, 64), np.float32), np.zeros((2, 64), BF16), np.zeros((2, 64), BF16), g,
                        np.zeros((4, 64), np.float32)[::2])


BF16 = ml_dtypes.bfloat16
EPS, CLAMP = 1e-6, 1e-3


def _gate_inputs(rng, tokens, hc, hidden, k_stride=None):
    x = rng.standard_normal((tokens, hc, hidden)).astype(BF16)
    kbig = rng.standard_normal((tokens, hc, k_stride or hidden)).astype(BF16)
    k = kbig[:, :, :hidden]  # a strided view when k_stride is given (TileKernels passes such k)
    v = rng.standard_normal((tokens, hidden)).astype(BF16)
    w = (rng.standard_normal((hc, hidden)) * 0.5 + 1).astype(np.float32)
    return x, k, v, w


def _gate_reference(x, k, v, w, eps=EPS, clamp=CLAMP):
    """float64: (output, raw dot, gate, rstd_x, rstd_k)."""
    x, k, v, w = (a.astype(np.float64) for a in (x, k, v, w))
    hidden = x.shape[-1]
    rx = 1 / np.sqrt((x * x).mean(-1) + eps)
    rk = 1 / np.sqrt((k * k).mean(-1) + eps)
    raw = (x * w[None] * k).sum(-1)
    d = raw * rx * rk * hidden ** -0.5
    g = 1 / (1 + np.exp(-np.sign(d) * np.sqrt(np.maximum(np.abs(d), clamp))))
    return x + g[..., None] * v[:, None, :], raw, g, rx, rk


@pytest.mark.parametrize("tokens,hc,hidden", [(5, 4, 512), (9, 2, 328)])
def test_engram_gate_fwd_matches_float64(rng, tokens, hc, hidden):
    x, k, v, w = _gate_inputs(rng, tokens, hc, hidden, k_stride=hidden + 64)
    out, dot, gate, rx, rk = E.engram_gate_fwd(x, k, v, w, EPS, CLAMP)
    want = _gate_reference(x, k, v, w)
    assert out.dtype == BF16 and out.shape == x.shape
    np.testing.assert_allclose(out.astype(np.float64), want[0], rtol=2 ** -8, atol=1e-2)
    for got, ref in zip((dot, gate, rx, rk), want[1:]):
        assert got.dtype == np.float32 and got.shape == (tokens, hc)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    again = E.engram_gate_fwd(x, k, v, w, EPS, CLAMP, save_for_backward=False)
    assert again[1:] == (None, None, None, None) and np.array_equal(again[0].view(np.uint16), out.view(np.uint16))


def test_engram_gate_bwd_matches_float64_gradients(rng):
    tokens, hc, hidden = 7, 3, 256
    x, k, v, w = _gate_inputs(rng, tokens, hc, hidden)
    grad_out = rng.standard_normal((tokens, hc, hidden)).astype(BF16)
    _, dot, gate, rx, rk = E.engram_gate_fwd(x, k, v, w, EPS, CLAMP)
    gx, gk, gv, gw = E.engram_gate_bwd(grad_out, x, k, v, w, dot, gate, rx, rk, CLAMP)
    assert gw.shape == (E.GATE_BWD_BLOCKS, hc, hidden) and gw.dtype == np.float32
    # float64 gradients of sum(grad_out * output) by the chain rule, written out independently
    X, Kf, V, W, G = (a.astype(np.float64) for a in (x, k, v, w, grad_out))
    out, raw, g, r_x, r_k = _gate_reference(x, k, v, w)
    scale = r_x * r_k * hidden ** -0.5
    d = raw * scale
    dq = (G * V[:, None, :]).sum(-1) * g * (1 - g)
    dd = np.where(np.abs(d) < CLAMP, 0.0, dq * 0.5 / np.sqrt(np.abs(d)))
    ds = dd * scale  # d loss / d raw
    dscale_x = dd * raw * r_k * hidden ** -0.5  # d loss / d rstd_x
    dscale_k = dd * raw * r_x * hidden ** -0.5
    want_gx = G + ds[..., None] * W[None] * Kf - (dscale_x * r_x ** 3 / hidden)[..., None] * X
    want_gk = ds[..., None] * W[None] * X - (dscale_k * r_k ** 3 / hidden)[..., None] * Kf
    want_gv = (G * g[..., None]).sum(1)
    want_gw = (ds[..., None] * X * Kf).sum(0)
    np.testing.assert_allclose(gx.astype(np.float64), want_gx, rtol=2 ** -7, atol=2e-2)
    np.testing.assert_allclose(gk.astype(np.float64), want_gk, rtol=2 ** -7, atol=2e-2)
    np.testing.assert_allclose(gv.astype(np.float64), want_gv, rtol=2 ** -7, atol=2e-2)
    np.testing.assert_allclose(gw.sum(0), want_gw, rtol=1e-4, atol=1e-3)
    # the chain rule above against finite differences of the float64 forward, on a few elements
    def loss(xx):
        return float((G * _gate_reference(xx, k, v, w)[0]).sum())
    for idx in [(0, 0, 3), (4, 2, 100), (6, 1, 255)]:
        h = 1e-4
        xp, xm = X.copy(), X.copy()
        xp[idx] += h
        xm[idx] -= h
        assert abs((loss(xp) - loss(xm)) / (2 * h) - want_gx[idx]) < 1e-4 * (1 + abs(want_gx[idx]))
    # bits do not depend on the thread count
    saved = tessera.num_threads()
    tessera.set_num_threads(1)
    try:
        again = E.engram_gate_bwd(grad_out, x, k, v, w, dot, gate, rx, rk, CLAMP)
    finally:
        tessera.set_num_threads(saved)
    for a, b in zip((gx, gk, gv, gw), again):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_grad_w_reduce_accumulates_in_place(rng):
    blocks, hc, hidden = 6, 2, 700
    partial = rng.standard_normal((blocks, hc, hidden)).astype(np.float32)
    wh = rng.standard_normal((hc, hidden)).astype(BF16)
    we = rng.standard_normal((hc, hidden)).astype(BF16)
    gwh = rng.standard_normal((hc, hidden)).astype(np.float32)
    gwe = rng.standard_normal((hc, hidden)).astype(np.float32)
    total = np.zeros((hc, hidden), np.float32)
    for p in range(blocks):
        total += partial[p]
    want_h = gwh + total * we.astype(np.float32)
    want_e = gwe + total * wh.astype(np.float32)
    assert E.grad_w_reduce(partial, wh, we, gwh, gwe) is None
    np.testing.assert_array_equal(gwh, want_h)
    np.testing.assert_array_equal(gwe, want_e)


@pytest.mark.parametrize("tokens", [1, 130])
def test_engram_hash_of_wrapping_products_and_extreme_sizes(rng, tokens):
    """Multipliers near 2^62 make the int64 products wrap and the hashes negative (floor modulo keeps
    the result in [0, size)); sizes from 1 to 2^31 - 1."""
    max_ngram, layers, tables = 3, 2, 4
    ids = rng.integers(0, 2 ** 31 - 1, size=(tokens, max_ngram)).astype(np.int32)
    mult = rng.integers(2 ** 61, 2 ** 63 - 1, size=(layers, max_ngram)).astype(np.int64)
    vocab = rng.integers(1, 2 ** 31 - 1, size=(layers, max_ngram - 1, tables)).astype(np.int32)
    vocab[0, 0, :] = [1, 2, 2 ** 31 - 1, 3]
    offsets = np.zeros((layers, (max_ngram - 1) * tables), np.int32)
    got = E.engram_hash(ids, mult, vocab, offsets)
    h = ids[None].astype(np.int64) * mult[:, None, :]  # wraps like the kernel's int64 products
    h = np.bitwise_xor.accumulate(h, axis=2)[:, :, 1:]
    assert (h < 0).any()
    want = [[[int(h[l, t, n]) % int(vocab[l, n, e]) for n in range(max_ngram - 1) for e in range(tables)]
             for t in range(tokens)] for l in range(layers)]
    assert np.array_equal(got, np.array(want, np.int64).astype(np.int32))


def test_engram_gate_autograd_matches_float64(rng):
    torch = pytest.importorskip("torch")
    from tessera.tile_kernels.modeling.engram import engram_gate

    def bf16(shape, scale=1.0, shift=0.0):
        return (torch.from_numpy(rng.standard_normal(shape) * scale + shift).float().bfloat16()).requires_grad_()

    x, k = bf16((2, 3, 4, 256)), bf16((2, 3, 4, 256))
    v = bf16((2, 3, 256))
    wh, we = bf16((4, 256), 0.1, 1.0), bf16((4, 256), 0.1, 1.0)
    out = engram_gate(x, k, v, wh, we, CLAMP, EPS)
    assert out.shape == x.shape and out.dtype == torch.bfloat16
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(8)).bfloat16()
    out.backward(g)
    refs = [t.detach().double().requires_grad_() for t in (x, k, v, wh, we)]
    X, Kr, V, WH, WE = refs
    rx = torch.rsqrt(X.square().mean(-1) + EPS)
    rk = torch.rsqrt(Kr.square().mean(-1) + EPS)
    d = (X * WH * Kr * WE).sum(-1) * rx * rk * 256 ** -0.5
    gate = torch.sigmoid(d.abs().clamp_min(CLAMP).sqrt() * d.sign())
    (X + gate.unsqueeze(-1) * V.unsqueeze(-2)).backward(g.double())
    for got, ref, tol in zip((x, k, v, wh, we), refs, (2e-2, 2e-2, 2e-2, 5e-2, 5e-2)):
        torch.testing.assert_close(got.grad.double(), ref.grad, rtol=2 ** -6, atol=tol)
