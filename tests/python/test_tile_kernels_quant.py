"""tessera.tile_kernels.quant against numpy references, bit for bit.

References: block absolute maxima in float64 (exact for these inputs), factors as the two float32
divisions the API defines (sf = max(amax, floor) / max_code, sf_inv = max_code / max(...)), round_sf as
the next power of two of sf; e4m3 codes from ml_dtypes (round to nearest even), e2m1 codes by a nearest
search over the 8 magnitudes in float64 with ties to the even code. Sizes are odd and leave tails.
Kernels compile once per configuration (cached), so tests share shapes.
"""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera.tile_kernels import quant as Q

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)
FLOOR = {"e4m3": np.float32(1e-4), "e2m1": np.float32(6.0 * 2.0 ** -126)}
MAXC = {"e4m3": np.float32(448.0), "e2m1": np.float32(6.0)}


def block_amax(x, bt, bc):
    t, h = x.shape
    m, k = -(-t // bt), -(-h // bc)
    pad = np.zeros((m * bt, k * bc))
    pad[:t, :h] = np.abs(x.astype(np.float64))
    return pad.reshape(m, bt, k, bc).max(axis=(1, 3)).astype(np.float32)


def factors(amax, fmt, round_sf):
    clamped = np.maximum(amax, FLOOR[fmt])
    sf, inv = clamped / MAXC[fmt], MAXC[fmt] / clamped
    if round_sf:
        sf = ((sf.view(np.int32) + 0x7FFFFF) & 0x7F800000).view(np.float32)
        inv = np.float32(1) / sf
    return sf, inv


def e2m1_codes(v):
    a = np.abs(v.astype(np.float64))
    dist = np.abs(a[..., None] - E2M1)
    best = dist.min(axis=-1, keepdims=True)
    ties = dist == best
    code = np.where(ties[..., ::2].any(-1), np.argmax(ties & (np.arange(8) % 2 == 0), axis=-1), np.argmax(ties, -1))
    return (code + 8 * np.signbit(v)).astype(np.uint8)


def encode(scaled, fmt):
    if fmt == "e4m3":
        return np.clip(scaled, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    codes = e2m1_codes(scaled)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def expand(f, bt, bc, shape):
    return np.repeat(np.repeat(f, bt, axis=0), bc, axis=1)[:shape[0], :shape[1]]


def reference(x, fmt, bt, bc, round_sf=False):
    """(codes as uint8, sf float32 [m, k]) of a float32 matrix."""
    xf = x.astype(np.float32)
    sf, inv = factors(block_amax(xf, bt, bc), fmt, round_sf)
    return encode(xf * expand(inv, bt, bc, xf.shape), fmt), sf


def logical_sf(sf, k):
    """The float32 [m, k] factors behind any of the three layouts."""
    sf = np.asarray(sf)
    if sf.dtype == np.int32:
        exps = np.ascontiguousarray(sf).view(np.uint8).reshape(sf.shape[0], -1)
        assert not exps[:, k:].any(), "padding bytes of packed UE8M0 are zero"
        return (exps[:, :k].astype(np.int32) << 23).view(np.float32)
    return sf


def as_bytes(a):
    return np.asarray(a).view(np.uint8)


def inputs(rng, shape, dtype=ml_dtypes.bfloat16, scale=3.0):
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    x[0, :] = 0  # an all-zero row: its factor is the floor
    return x


@pytest.mark.parametrize("fmt,npc,dtype,round_sf,layout", [
    ("e4m3", 128, ml_dtypes.bfloat16, False, "row"),
    ("e4m3", 64, np.float32, True, "col"),
    ("e2m1", 32, np.float32, True, "ue8m0"),
    ("e2m1", 16, ml_dtypes.bfloat16, False, "row"),
])
def test_per_token_cast_bitwise(rng, fmt, npc, dtype, round_sf, layout):
    x = inputs(rng, (37, 448), dtype)
    codes, sf = Q.per_token_cast(x, fmt, npc, use_tma_aligned_col_major_sf=layout != "row", round_sf=round_sf,
                                 use_packed_ue8m0=layout == "ue8m0")
    want_codes, want_sf = reference(x, fmt, 1, npc, round_sf)
    assert codes.dtype == (ml_dtypes.float8_e4m3fn if fmt == "e4m3" else np.int8)
    assert np.array_equal(as_bytes(codes), want_codes)
    if layout != "row":
        assert sf.strides[0] == sf.dtype.itemsize and sf.shape[0] == 37  # column-major view
    assert np.array_equal(logical_sf(sf, want_sf.shape[1]), want_sf)


def test_per_token_cast_whole_row_and_ties(rng):
    x = inputs(rng, (5, 192), np.float32)
    x[1, :8] = [448, 1.0625, 1.1875, -0.0, 1e-30, -1e-30, 2.0, 3.0]  # exact ties of e4m3 at factor 1
    codes, sf = Q.per_token_cast(x, "e4m3", 192)
    want_codes, want_sf = reference(x, "e4m3", 1, 192)
    assert sf[1, 0] == 1.0 and np.array_equal(as_bytes(codes), want_codes) and np.array_equal(sf, want_sf)


def test_e2m1_ties_and_saturation():
    # factor 1 (amax 6): every midpoint of the e2m1 grid rounds to the even code
    row = np.array([6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0, 0.2, 2.9, 6, -6, -0.0, 0.0], np.float32)
    codes, sf = Q.per_token_cast(np.tile(row, (2, 1)), "e2m1", 16)
    assert sf[0, 0] == 1.0
    nibbles = np.stack([as_bytes(codes)[0] & 15, as_bytes(codes)[0] >> 4], axis=1).reshape(-1)
    assert list(nibbles) == [7, 0, 2, 2, 4, 4, 6, 6, 8, 14, 0, 5, 7, 15, 8, 0]


def test_sf_only_and_precomputed_match_full_cast(rng):
    x = inputs(rng, (37, 448))
    codes, sf = Q.per_token_cast(x, "e4m3", 128)
    assert np.array_equal(Q.per_token_cast_with_sf_only(x, "e4m3", 128), sf)
    # given factors multiply by their reciprocal (1 / sf is not always 448 / amax: compare with that rule)
    want = encode(x.astype(np.float32) * expand(np.float32(1) / sf, 1, 128, x.shape), "e4m3")
    assert np.array_equal(as_bytes(Q.per_token_cast_with_precomputed_sf(x, "e4m3", 128, sf)), want)
    # precomputed factors in the packed layout
    codes_p, sf_p = Q.per_token_cast(x, "e4m3", 128, round_sf=True, use_tma_aligned_col_major_sf=True,
                                     use_packed_ue8m0=True)
    again = Q.per_token_cast_with_precomputed_sf(x, "e4m3", 128, sf_p)
    assert np.array_equal(as_bytes(again), as_bytes(codes_p))


def test_requantize_quantized_input(rng):
    """A (codes, sf) input is decoded as code * sf (float32), then cast like any float matrix."""
    x = inputs(rng, (37, 448))
    pair = Q.per_token_cast(x, "e4m3", 128)
    codes, sf = Q.per_token_cast(pair, "e4m3", 64, x_block_size=(1, 128))
    decoded = pair[0].astype(np.float32) * expand(pair[1], 1, 128, x.shape)
    want_codes, want_sf = reference(decoded, "e4m3", 1, 64)
    assert np.array_equal(as_bytes(codes), want_codes) and np.array_equal(sf, want_sf)
    fp4 = Q.per_token_cast(x, "e2m1", 32, round_sf=True, use_tma_aligned_col_major_sf=True, use_packed_ue8m0=True)
    back = Q.cast_back(fp4, "fp32", (1, 32))
    codes, sf = Q.per_token_cast(fp4, "e4m3", 64, x_block_size=(1, 32))
    want_codes, want_sf = reference(back, "e4m3", 1, 64)
    assert np.array_equal(as_bytes(codes), want_codes) and np.array_equal(sf, want_sf)


@pytest.mark.parametrize("fmt,block,round_sf,layout", [
    ("e4m3", (128, 128), False, "row"),
    ("e2m1", (32, 32), True, "ue8m0"),
    ("e4m3", (32, 128), True, "col"),
])
def test_per_block_cast_bitwise(rng, fmt, block, round_sf, layout):
    x = inputs(rng, (200, 320))
    codes, sf = Q.per_block_cast(x, fmt, block, use_tma_aligned_col_major_sf=layout != "row", round_sf=round_sf,
                                 use_packed_ue8m0=layout == "ue8m0")
    want_codes, want_sf = reference(x, fmt, *block, round_sf)
    assert np.array_equal(as_bytes(codes), want_codes)
    assert np.array_equal(logical_sf(sf, want_sf.shape[1]), want_sf)
    assert np.array_equal(logical_sf(Q.per_block_cast_with_sf_only(x, fmt, block, layout != "row", round_sf,
                                                                   layout == "ue8m0"), want_sf.shape[1]), want_sf)
    if layout == "row":
        want = encode(x.astype(np.float32) * expand(np.float32(1) / sf, *block, x.shape), fmt)
        assert np.array_equal(as_bytes(Q.per_block_cast_with_precomputed_sf(x, fmt, block, sf)), want)


@pytest.mark.parametrize("fmt_out", ["bf16", "fp32"])
def test_cast_back(rng, fmt_out):
    x = inputs(rng, (37, 448))
    for pair, block in ((Q.per_token_cast(x, "e4m3", 128), (1, 128)),
                        (Q.per_block_cast(np.ascontiguousarray(x[:, :384]), "e2m1", (32, 32), True, True, True), (32, 32))):
        data = as_bytes(pair[0])
        hidden = 448 if block == (1, 128) else 384
        if block == (1, 128):
            values = data.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        else:
            values = np.stack([E2M1[data & 7] * np.where(data & 8, -1, 1),
                               E2M1[(data >> 4) & 7] * np.where(data & 128, -1, 1)], axis=-1).reshape(37, hidden)
        sf = logical_sf(pair[1], -(-hidden // block[1]))
        want = values * expand(sf.astype(np.float64), *block, values.shape)
        got = Q.cast_back(pair, fmt_out, block)
        want = want.astype(ml_dtypes.bfloat16 if fmt_out == "bf16" else np.float32)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))
    pair = Q.per_token_cast(x, "e4m3", 64)
    assert np.array_equal(Q.per_token_cast_back(pair, fmt_out, 64), Q.cast_back(pair, fmt_out, (1, 64)))


@pytest.mark.parametrize("api", ["plain", "transpose", "fused_gather", "fused_quantized"])
def test_per_channel_casts(rng, api):
    x = inputs(rng, (256, 320))
    if api == "plain":
        codes, sf = Q.per_channel_cast(x, "e4m3", 128, round_sf=True)
        want_codes, want_sf = reference(x, "e4m3", 128, 1, True)
    elif api == "transpose":
        codes, sf = Q.per_channel_cast_and_transpose(x, "e4m3", 32)
        want_codes, want_sf = reference(x, "e4m3", 32, 1)
        want_codes = want_codes.T
    elif api == "fused_gather":
        pos = rng.integers(-1, 256, size=144).astype(np.int32)
        codes, sf = Q.per_channel_cast_fused(x, "e4m3", 128, pos_to_token=pos)
        gathered = np.where(pos[:, None] >= 0, x.astype(np.float32)[pos], 0)
        want_codes, want_sf = reference(gathered, "e4m3", 128, 1)
    else:
        pair = Q.per_token_cast(x, "e4m3", 128)
        codes, sf = Q.per_channel_cast_fused(pair, "e4m3", 128, num_per_channels=128)
        decoded = pair[0].astype(np.float32) * expand(pair[1], 1, 128, x.shape)
        want_codes, want_sf = reference(decoded, "e4m3", 128, 1)
    assert np.array_equal(as_bytes(codes), want_codes) and np.array_equal(sf, want_sf)


def test_unpack_from_e2m1fn_x2():
    packed = np.arange(-128, 128, dtype=np.int8).reshape(2, 4, 32)
    got = Q.unpack_from_e2m1fn_x2(packed)
    b = packed.view(np.uint8)
    want = np.stack([E2M1[b & 7] * np.where(b & 8, -1, 1), E2M1[(b >> 4) & 7] * np.where(b & 128, -1, 1)], -1)
    assert got.shape == (2, 4, 64) and np.array_equal(got, want.reshape(2, 4, 64).astype(np.float32))


def test_torch_inputs_give_the_numpy_bits(rng):
    torch = pytest.importorskip("torch")
    x = inputs(rng, (37, 448), np.float32)
    codes, sf = Q.per_token_cast(torch.from_numpy(x), "e4m3", 128, round_sf=True,
                                 use_tma_aligned_col_major_sf=True, use_packed_ue8m0=True)
    want_codes, want_sf = Q.per_token_cast(x, "e4m3", 128, round_sf=True, use_tma_aligned_col_major_sf=True,
                                           use_packed_ue8m0=True)
    assert codes.dtype == torch.float8_e4m3fn and sf.dtype == torch.int32 and sf.stride(0) == 1
    assert np.array_equal(codes.view(torch.uint8).numpy(), as_bytes(want_codes))
    assert np.array_equal(sf.numpy(), want_sf)
    back = Q.cast_back((codes, sf), "bf16", (1, 128))
    assert back.dtype == torch.bfloat16 and back.shape == (37, 448)
    codes4, _ = Q.per_block_cast(torch.from_numpy(x[:, :384].copy()), "e2m1", (32, 32))
    assert codes4.dtype == torch.int8 and codes4.shape == (37, 192)


def test_empty_token_count():
    codes, sf = Q.per_token_cast(np.zeros((0, 256), np.float32), "e4m3", 128)
    assert codes.shape == (0, 256) and sf.shape == (0, 2)


@pytest.mark.parametrize("call,match", [
    (lambda x: Q.per_token_cast(x, "e5m2", 128), r"per_token_cast: argument 'fmt'"),
    (lambda x: Q.per_token_cast(x, "e4m3", 100), r"per_token_cast: argument 'num_per_channels'"),
    (lambda x: Q.per_token_cast(x.astype(np.float64), "e4m3", 128), r"per_token_cast: argument 'x' must have dtype"),
    (lambda x: Q.per_token_cast(x[0], "e4m3", 128), r"argument 'x' must have 2 dimensions"),
    (lambda x: Q.per_token_cast(x, "e4m3", 128, use_packed_ue8m0=True), r"'use_packed_ue8m0' needs round_sf"),
    (lambda x: Q.per_token_cast(list(x), "e4m3", 128), r"must be a torch CPU tensor or a numpy array"),
    (lambda x: Q.per_token_cast_with_precomputed_sf(x, "e4m3", 128, np.ones((3, 2), np.float32)),
     r"argument 'sf' must have shape \[37, 4\]"),
    (lambda x: Q.per_block_cast(x, "e4m3", (64, 64)), r"per_block_cast: argument 'block_size'"),
    (lambda x: Q.per_block_cast(x[:, :100], "e4m3", (32, 32)), r"must be contiguous|multiple of 64"),
    (lambda x: Q.cast_back(x, "fp32", (1, 128)), r"cast_back: argument 'x' must be a \(data, sf\) tuple"),
    (lambda x: Q.per_channel_cast(x, "e4m3", 128), r"per_channel_cast: argument 'x' the number of tokens"),
])
def test_bad_input_raises_named_error(rng, call, match):
    x = inputs(rng, (37, 448))
    with pytest.raises(tessera.InvalidArgumentError, match=match):
        call(x)


def test_e5m6_format_only_where_tilekernels_takes_it(rng):
    x = rng.standard_normal((3, 128)).astype(np.float32)
    data, sf = Q.per_token_cast(x, "e5m6", 128)
    want = Q.per_token_cast_to_e5m6(x, 128)
    assert np.array_equal(data, want[0]) and np.array_equal(sf, want[1])
    with pytest.raises(tessera.InvalidArgumentError, match="per_block_cast: argument 'fmt' 'e5m6' is only"):
        Q.per_block_cast(x, "e5m6", (32, 32))


_DETERMINISM = """
import sys, hashlib, numpy as np, ml_dtypes, tessera
from tessera.tile_kernels import quant as Q
tessera.set_num_threads(int(sys.argv[1]))
x = (np.random.default_rng(7).standard_normal((300, 448)) * 3).astype(ml_dtypes.bfloat16)
h = hashlib.sha256()
for part in (*Q.per_token_cast(x, "e4m3", 128), *Q.per_block_cast(np.ascontiguousarray(x[:, :384]), "e2m1", (32, 32), True, True, True),
             *Q.per_channel_cast(x[:256], "e4m3", 128)):
    h.update(np.ascontiguousarray(part).view(np.uint8).tobytes())
print(h.hexdigest())
"""


def test_bitwise_identical_across_thread_counts():
    outs = {subprocess.run([sys.executable, "-c", _DETERMINISM, str(n)], capture_output=True, text=True,
                           env=dict(os.environ), check=True).stdout.strip() for n in (1, 2)}
    assert len(outs) == 1 and len(next(iter(outs))) == 64


def test_swiglu_forward_and_per_token_cast(rng):
    """Codes times factors reproduce silu(l) * r * w within e4m3's rounding (exp is a polynomial in the
    kernel, so values may differ from float64 in the last float32 bits); clamp counts are exact."""
    x = (rng.standard_normal((37, 512)) * 2).astype(ml_dtypes.bfloat16)
    pos = rng.integers(-1, 120, size=37).astype(np.int32)
    w = rng.random((30, 4)).astype(np.float32)
    p2e = np.where(rng.random(37) < 0.2, -1, 3).astype(np.int32)
    count = np.array([5, 0, 0], np.int64)
    codes, sf = Q.swiglu_forward_and_per_token_cast(x, "e4m3", 128, pos, w, p2e, swiglu_clamp_value=2.5,
                                                    clamped_count=count)
    xf = x.astype(np.float64)
    left, right = xf[:, :256], xf[:, 256:]
    assert count.tolist() == [5 + (left > 2.5).sum(), (right > 2.5).sum(), (right < -2.5).sum()]
    left, right = np.minimum(left, 2.5), np.clip(right, -2.5, 2.5)
    weight = np.where(pos >= 0, w.reshape(-1)[np.maximum(pos, 0)], 0) * (p2e >= 0)
    value = left / (1 + np.exp(-left)) * right * weight[:, None]
    scale = np.repeat(sf.astype(np.float64), 128, axis=1)
    amax = np.abs(value).reshape(37, 2, 128).max(-1)
    np.testing.assert_allclose(sf, np.maximum(amax, 1e-4) / 448, rtol=1e-6)
    decoded = codes.astype(np.float64) * scale
    assert (np.abs(decoded - value) <= 0.0626 * np.abs(value) + scale * 2.0 ** -9 + 1e-12).all()
    assert (decoded[p2e < 0] == 0).all()
    plain, plain_sf = Q.swiglu_forward_and_per_token_cast(x, "e4m3", 256, round_sf=True)
    v = xf[:, :256] / (1 + np.exp(-xf[:, :256])) * xf[:, 256:]
    assert plain_sf.shape == (37, 1)
    assert (np.abs(plain.astype(np.float64) * plain_sf - v) <= 0.0626 * np.abs(v) + plain_sf * 2.0 ** -9).all()


@pytest.mark.parametrize("out_block", [(1, 128), (32, 32), (128, 128)])
def test_per_block_cast_lossless(rng, out_block):
    x = inputs(rng, (200, 384))
    x[5, :] *= 1000  # factors that differ by 2^10 between rows
    x[128:, :] *= 1e-30  # blocks of factors far below the e4m3 cast's 1e-4 floor
    fp4 = Q.per_token_cast(x, "e2m1", 32, round_sf=True, use_tma_aligned_col_major_sf=True, use_packed_ue8m0=True)
    fp8 = Q.per_block_cast_lossless(fp4, "e4m3", (1, 32), out_block, True, True, True)
    assert np.array_equal(Q.cast_back(fp8, "fp32", out_block), Q.cast_back(fp4, "fp32", (1, 32)))
    assert fp8[0].dtype == ml_dtypes.float8_e4m3fn and fp8[1].dtype == np.int32


@pytest.mark.parametrize("clamp", [None, 1.5])
def test_swiglu_backward_and_per_token_cast(rng, clamp):
    rows, hidden, tokens, topk = 40, 256, 12, 4
    x = inputs(rng, (rows, 2 * hidden))
    codes, sf = Q.per_token_cast(x, "e4m3", 128)
    grad_out = rng.standard_normal((rows, hidden)).astype(ml_dtypes.bfloat16)
    weight = rng.random((tokens, topk)).astype(np.float32)
    pairs = rng.permutation(tokens * topk)[:rows - 4]
    pos_to_tk = np.concatenate([pairs, [-1] * 4]).astype(np.int32)
    tk_to_pos = np.full(tokens * topk, -1, np.int32)
    tk_to_pos[pairs] = np.arange(rows - 4)
    tk_to_pos = tk_to_pos.reshape(tokens, topk)
    out, (g8, gsf), grad, wgrad = Q.swiglu_backward_and_per_token_cast((codes, sf), grad_out, weight, pos_to_tk,
                                                                       tk_to_pos, 128, swiglu_clamp_value=clamp)
    xd = codes.astype(np.float64) * expand(sf.astype(np.float64), 1, 128, codes.shape)
    left, right = xd[:, :hidden], xd[:, hidden:]
    lc = np.minimum(left, clamp) if clamp else left
    rc = np.clip(right, -clamp, clamp) if clamp else right
    s = 1 / (1 + np.exp(-lc))
    w = np.where(pos_to_tk >= 0, weight.reshape(-1)[np.maximum(pos_to_tk, 0)], 0)[:, None]
    go = grad_out.astype(np.float64)
    gl = go * w * s * rc * (1 + lc * (1 - s))
    gr = go * w * s * lc
    if clamp:
        gl[left > clamp] = 0
        gr[(right > clamp) | (right < -clamp)] = 0
    act = lc * s * rc
    want_wgrad = np.zeros(tokens * topk)
    want_wgrad[pairs] = (go * act).sum(1)[:rows - 4]
    np.testing.assert_allclose(out.astype(np.float64), act * w, rtol=2 ** -7, atol=1e-6)
    full = np.concatenate([gl, gr], axis=1)
    np.testing.assert_allclose(grad.astype(np.float64), full, rtol=2 ** -7, atol=1e-6)
    np.testing.assert_allclose(wgrad.reshape(-1), want_wgrad, rtol=1e-5, atol=1e-5)
    scale = expand(gsf.astype(np.float64), 1, 128, full.shape)
    assert (np.abs(g8.astype(np.float64) * scale - full) <= 0.0626 * np.abs(full) + scale * 2.0 ** -9 + 1e-9).all()


@pytest.mark.parametrize("npt,transposed,clamp", [(128, True, None), (32, False, 2.0)])
def test_swiglu_forward_and_per_channel_cast_and_transpose(rng, npt, transposed, clamp):
    x = (rng.standard_normal((256, 384)) * 2).astype(ml_dtypes.bfloat16)
    codes, sf = Q.swiglu_forward_and_per_channel_cast_and_transpose(x, "e4m3", npt, without_transpose=not transposed,
                                                                    swiglu_clamp_value=clamp)
    f = x.astype(np.float64)
    left, right = f[:, :192], f[:, 192:]
    if clamp:
        left, right = np.minimum(left, clamp), np.clip(right, -clamp, clamp)
    value = left / (1 + np.exp(-left)) * right
    decoded = (codes.T if transposed else codes).astype(np.float64)
    scale = expand(sf.astype(np.float64), npt, 1, value.shape)
    np.testing.assert_allclose(sf, np.maximum(block_amax(value, npt, 1), 1e-4) / 448, rtol=1e-6)
    assert (np.abs(decoded * scale - value) <= 0.0626 * np.abs(value) + scale * 2.0 ** -9 + 1e-12).all()


def test_requantize_whole_row_blocks(rng):
    """num_per_channels == hidden spanning several input factor blocks (192 = 128 + 64)."""
    x = inputs(rng, (9, 192), np.float32)
    pair = Q.per_token_cast(x, "e4m3", 64)
    codes, sf = Q.per_token_cast(pair, "e4m3", 192, x_block_size=(1, 64))
    decoded = pair[0].astype(np.float32) * expand(pair[1], 1, 64, x.shape)
    want_codes, want_sf = reference(decoded, "e4m3", 1, 192)
    assert np.array_equal(as_bytes(codes), want_codes) and np.array_equal(sf, want_sf)
    with pytest.raises(tessera.InvalidArgumentError, match=r"argument 'x_block_size' channel block 48"):
        Q.per_token_cast((pair[0], np.ones((9, 4), np.float32)), "e4m3", 32, x_block_size=(1, 48))
