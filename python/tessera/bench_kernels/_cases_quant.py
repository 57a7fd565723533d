"""The FP8 cast rows: per-token (1 x 128) and per-block (128 x 128) e4m3 casts of bf16 activations, and
the per-token cast back to bf16. Peers: the same computation in plain numpy (ml_dtypes' float8
conversion) and in torch (DeepGEMM's per_token_cast_to_fp8 / per_block_cast_to_fp8 formulas)."""
import numpy as np

from ._case import BF16, E4M3, Case, as_numpy, as_torch, ratio, rotated, sample_rows

_MAX_E4M3 = np.float32(448)
_FLOOR = np.float32(1e-4)


def _codes_tolerance(x64, sf64):
    """An e4m3 code times its factor is within half a code step of x: 2^-4 |x| for normal codes, 2^-10
    sf in the subnormal range; plus float32 rounding of the factor and the scaled value."""
    return 2.0 ** -4 * np.abs(x64) + 2.0 ** -10 * sf64 + 1e-6 * np.abs(x64) + 1e-30


def _check_blocks(x, codes, sf, rows, block_rows):
    """Worst error / tolerance over the given rows: factors against float64 block maxima / 448, codes
    decoded (code * sf) against x."""
    x64 = x[rows].astype(np.float64)
    t, h = x64.shape
    codes64 = as_numpy(codes)[rows].astype(np.float64)
    sf_rows = as_numpy(sf)[rows // block_rows].astype(np.float64)
    if block_rows == 1:
        amax = np.abs(x64.reshape(t, h // 128, 128)).max(axis=2)
    else:  # the whole 128-row block's maximum, from x's full rows of that block
        blocks = np.unique(rows // block_rows)
        full = np.abs(x[(blocks[:, None] * block_rows + np.arange(block_rows)).ravel()].astype(np.float64))
        amax_blocks = full.reshape(len(blocks), block_rows, h // 128, 128).max(axis=(1, 3))
        amax = amax_blocks[np.searchsorted(blocks, rows // block_rows)]
    sf_ref = np.maximum(amax, float(_FLOOR)) / 448.0
    sf_err = ratio(np.abs(sf_rows - sf_ref), 2.0 ** -22 * sf_ref)
    sf_each = np.repeat(sf_rows, 128, axis=1)
    return max(sf_err, ratio(np.abs(codes64 * sf_each - x64), _codes_tolerance(x64, sf_each)))


def _activations(tokens, hidden, seed):
    gen = np.random.default_rng(seed)
    x = gen.standard_normal((tokens, hidden), dtype=np.float32)
    x *= np.exp2(gen.integers(-6, 7, size=(tokens, 1))).astype(np.float32)  # rows of different magnitude
    return x.astype(BF16)


def per_token_cast(tokens, hidden, copies_for, torch):
    from ..tile_kernels.quant import per_token_cast as ours

    x0 = _activations(tokens, hidden, 1)
    xs = rotated(x0, copies_for(x0.nbytes))
    xt = [as_torch(torch, x) for x in xs] if torch else None

    def numpy_cast(x):
        t, h = x.shape
        f = x.astype(np.float32).reshape(t, h // 128, 128)
        amax = np.maximum(np.abs(f).max(axis=2), _FLOOR)
        codes = (f * (_MAX_E4M3 / amax)[..., None]).astype(E4M3)
        return codes.reshape(t, h), amax / _MAX_E4M3

    def torch_cast(x):
        t, h = x.shape
        f = x.float().view(t, h // 128, 128)
        amax = f.abs().amax(dim=2).clamp(min=1e-4)
        return (f * (448.0 / amax.unsqueeze(2))).to(torch.float8_e4m3fn).view(t, h), amax / 448.0

    rows = sample_rows(tokens)
    peers = {"numpy": lambda i: numpy_cast(xs[i])}
    if torch:
        peers["torch"] = lambda i: torch_cast(xt[i])
    return Case("per_token_cast", tokens, hidden, 128, tokens * hidden * 3 + tokens * (hidden // 128) * 4,
                len(xs), lambda i: ours(xs[i], "e4m3", 128), peers,
                lambda r: _check_blocks(x0, r[0], r[1], rows, 1))


def per_block_cast(tokens, hidden, copies_for, torch):
    from ..tile_kernels.quant import per_block_cast as ours

    x0 = _activations(tokens, hidden, 2)
    xs = rotated(x0, copies_for(x0.nbytes))
    xt = [as_torch(torch, x) for x in xs] if torch else None

    def numpy_cast(x):
        t, h = x.shape
        f = x.astype(np.float32).reshape(t // 128, 128, h // 128, 128)
        amax = np.maximum(np.abs(f).max(axis=(1, 3)), _FLOOR)
        codes = (f * (_MAX_E4M3 / amax)[:, None, :, None]).astype(E4M3)
        return codes.reshape(t, h), amax / _MAX_E4M3

    def torch_cast(x):
        t, h = x.shape
        f = x.float().view(t // 128, 128, h // 128, 128)
        amax = f.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4)
        codes = (f * (448.0 / amax)).to(torch.float8_e4m3fn).view(t, h)
        return codes, (amax / 448.0).view(t // 128, h // 128)

    rows = sample_rows(tokens)
    peers = {"numpy": lambda i: numpy_cast(xs[i])}
    if torch:
        peers["torch"] = lambda i: torch_cast(xt[i])
    return Case("per_block_cast", tokens, hidden, 128,
                tokens * hidden * 3 + (tokens // 128) * (hidden // 128) * 4, len(xs),
                lambda i: ours(xs[i], "e4m3", (128, 128)), peers, lambda r: _check_blocks(x0, r[0], r[1], rows, 128))


def cast_back(tokens, hidden, copies_for, torch):
    from ..tile_kernels.quant import cast_back as ours
    from ..tile_kernels.quant import per_token_cast

    codes0, sf0 = per_token_cast(_activations(tokens, hidden, 3), "e4m3", 128)
    codes = rotated(codes0, copies_for(codes0.nbytes + sf0.nbytes))
    sfs = [sf0] + [sf0.copy() for _ in range(len(codes) - 1)]
    pairs = list(zip(codes, sfs))
    tpairs = [(as_torch(torch, c), as_torch(torch, s)) for c, s in pairs] if torch else None

    def numpy_back(c, s):
        t, h = c.shape
        return (c.astype(np.float32).reshape(t, h // 128, 128) * s[..., None]).astype(BF16).reshape(t, h)

    def torch_back(c, s):
        t, h = c.shape
        return (c.float().view(t, h // 128, 128) * s.unsqueeze(2)).to(torch.bfloat16).view(t, h)

    rows = sample_rows(tokens)

    def check(out):
        want = codes0[rows].astype(np.float64) * np.repeat(sf0[rows].astype(np.float64), 128, axis=1)
        got = as_numpy(out)[rows].astype(np.float64)
        return ratio(np.abs(got - want), 2.0 ** -8 * np.abs(want) + 1e-30)

    peers = {"numpy": lambda i: numpy_back(*pairs[i])}
    if torch:
        peers["torch"] = lambda i: torch_back(*tpairs[i])
    return Case("cast_back", tokens, hidden, 128, tokens * hidden * 3 + tokens * (hidden // 128) * 4, len(pairs),
                lambda i: ours(pairs[i], "bf16", (1, 128)), peers, check)
