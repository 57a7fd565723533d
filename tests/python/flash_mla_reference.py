"""float64 references for the tessera.flash_mla tests: attention over explicit token rows, the FP8 KV-cache
byte layouts written from FlashMLA's description independently of the library, and FlashMLA's tolerance
check (section 7)."""
import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)

# (abs, rel, cosine) of FlashMLA's own tests (docs/attention.md)
DENSE_OUT = (8e-4, 2.01 / 128, 5e-6)
DENSE_LSE = (1e-6, 8.01 / 65536, 1e-10)
SPARSE_OUT = (1e-3, 2.01 / 128, 5e-6)
PREFILL_OUT = (8e-4, 3.01 / 128, 7e-6)
PREFILL_STAT = (1e-6, 2.01 / 65536, 1e-10)


def assert_close(what, got, ref, tol):
    """Each element: |err| < abs or |err| / (|ref| + 1e-6) < rel; +-inf/NaN positions exact; then the
    cosine-style diff 1 - 2<x,y>/(|x|^2+|y|^2) over the finite entries below tol[2]."""
    got = np.asarray(got, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    special = ~np.isfinite(ref)
    assert np.array_equal(np.isnan(got[special]), np.isnan(ref[special])), f"{what}: NaN positions differ"
    same_inf = got[special & ~np.isnan(ref)] == ref[special & ~np.isnan(ref)]
    assert same_inf.all(), f"{what}: +-inf positions differ"
    g, r = got[~special], ref[~special]
    assert np.isfinite(g).all(), f"{what}: non-finite values where the reference is finite"
    err = np.abs(g - r)
    bad = ~((err < tol[0]) | (err / (np.abs(r) + 1e-6) < tol[1]))
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} out of tolerance; first at {np.argmax(bad)}: "
                           f"got {g[np.argmax(bad)]}, reference {r[np.argmax(bad)]}")
    denom = (g * g + r * r).sum()
    diff = 0.0 if denom == 0 else 1 - 2 * (g * r).sum() / denom
    assert diff < tol[2], f"{what}: cosine diff {diff} >= {tol[2]}"


def attention(q, keys, d_v, scale, sink=None):
    """q [R, d], keys [T, d] (V = keys[:, :d_v]) -> out [R, d_v], lse [R], max_logits [R] in float64."""
    q = np.asarray(q, dtype=np.float64)
    keys = np.asarray(keys, dtype=np.float64)
    rows = q.shape[0]
    if keys.shape[0] == 0:
        return np.zeros((rows, d_v)), np.full(rows, np.inf), np.full(rows, -np.inf)
    s = (q @ keys.T) * scale
    mx = s.max(axis=1)
    p = np.exp(s - mx[:, None])
    total = p.sum(axis=1)
    lse = mx + np.log(total)
    out = (p @ keys[:, :d_v]) / total[:, None]
    if sink is not None:
        out = out / (1 + np.exp(np.asarray(sink, dtype=np.float64) - lse))[:, None]
    return out, lse, mx


# ---- FP8 KV cache, from FlashMLA's description ----

def spec_scale(amax):
    """max(amax / 448, 1e-4) rounded up to a power of two (float32 arithmetic like FlashMLA's reference)."""
    x = np.maximum(np.asarray(amax, dtype=np.float32) / np.float32(448), np.float32(1e-4))
    e = np.ceil(np.log2(x.astype(np.float64)))
    s = np.exp2(e).astype(np.float32)
    return np.where(s < x, s * 2, s).astype(np.float32)


def layout_meta(model1):
    return (512, 448, 64, 64, 7) if model1 else (576, 512, 64, 128, 4)


def spec_quantize_tokens(k, model1):
    """k bf16 [N, d] -> (values e4m3 bytes [N, nope], scales float32 [N, tiles])."""
    d, nope, _, tile, tiles = layout_meta(model1)
    x = np.asarray(k, dtype=np.float32)
    amax = np.abs(x[:, :nope]).reshape(-1, tiles, tile).max(axis=2)
    scales = spec_scale(amax)
    q = (x[:, :nope].reshape(-1, tiles, tile) / scales[:, :, None]).reshape(-1, nope)
    return q.astype(E4M3).view(np.uint8), scales


def token_bytes(cache, model1):
    """A quantised cache [blocks, bs, 1, bpt] -> per slot (values [nope] bytes, scales fp32, rope bf16 [64])."""
    blocks, bs = cache.shape[0], cache.shape[1]
    raw = np.lib.stride_tricks.as_strided(cache.view(np.uint8), shape=(blocks, cache.strides[0]),
                                          strides=(cache.strides[0], 1))
    if not model1:
        tok = np.stack([raw[:, t * 656:(t + 1) * 656] for t in range(bs)], axis=1).reshape(-1, 656)
        return tok[:, :512], tok[:, 512:528].copy().view(np.float32), tok[:, 528:656].copy().view(BF16)
    data = np.stack([raw[:, t * 576:(t + 1) * 576] for t in range(bs)], axis=1).reshape(-1, 576)
    sc = np.stack([raw[:, bs * 576 + t * 8: bs * 576 + t * 8 + 7] for t in range(bs)], axis=1).reshape(-1, 7)
    scales = sc.copy().view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    return data[:, :448], scales, data[:, 448:576].copy().view(BF16)


def spec_dequantize(cache, model1):
    """Every slot's K row as float64: e4m3 -> float32 * scale -> bf16, RoPE copied."""
    d, nope, _, tile, tiles = layout_meta(model1)
    values, scales, rope = token_bytes(cache, model1)
    v = values.copy().view(E4M3).astype(np.float32).reshape(-1, tiles, tile) * scales[:, :, None]
    nope_part = v.reshape(-1, nope).astype(BF16).astype(np.float64)
    return np.concatenate([nope_part, rope.astype(np.float64)], axis=1)
