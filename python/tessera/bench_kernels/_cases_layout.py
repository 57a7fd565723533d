"""The layout rows: transpose (bf16 activations), batched_transpose (per-expert e4m3 codes) and the
engram hash (the embedding indices of each token's n-grams: int64 products, xor and modulo per
table). Peers: numpy and torch, the transposes as a contiguous copy of the transposed view."""
import numpy as np

from ._case import BF16, E4M3, Case, as_numpy, as_torch, rotated


def _exact(want):
    def check(out):
        got = as_numpy(out)
        return 0.0 if got.shape == want.shape and np.array_equal(got.view(np.uint8), want.view(np.uint8)) \
            else float("inf")
    return check


def transpose(tokens, hidden, copies_for, torch):
    from ..tile_kernels.transpose import transpose as ours

    gen = np.random.default_rng(12)
    x0 = gen.standard_normal((tokens, hidden), dtype=np.float32).astype(BF16)
    xs = rotated(x0, copies_for(x0.nbytes))
    xt = [as_torch(torch, x) for x in xs] if torch else None
    peers = {"numpy": lambda i: np.ascontiguousarray(xs[i].T)}
    if torch:
        peers["torch"] = lambda i: xt[i].t().contiguous()
    return Case("transpose", tokens, hidden, 0, x0.nbytes * 2, len(xs), lambda i: ours(xs[i]), peers,
                _exact(np.ascontiguousarray(x0.T)))


def batched_transpose(batches, tokens, hidden, copies_for, torch):
    from ..tile_kernels.transpose import batched_transpose as ours

    gen = np.random.default_rng(13)
    x0 = (gen.standard_normal((batches, tokens, hidden), dtype=np.float32) * 16).astype(E4M3)
    xs = rotated(x0, copies_for(x0.nbytes))
    xt = [as_torch(torch, x.view(np.uint8)) for x in xs] if torch else None  # torch copies bytes as uint8
    peers = {"numpy": lambda i: np.ascontiguousarray(xs[i].transpose(0, 2, 1))}
    if torch:
        peers["torch"] = lambda i: xt[i].transpose(1, 2).contiguous()
    return Case("batched_transpose", tokens, hidden, batches, x0.nbytes * 2, len(xs), lambda i: ours(xs[i]), peers,
                _exact(np.ascontiguousarray(x0.transpose(0, 2, 1))))


def engram_hash(tokens, layers, max_ngram, tables, copies_for, torch):
    from ..tile_kernels.engram import engram_hash as ours

    gen = np.random.default_rng(14)
    ids0 = gen.integers(0, 129280, size=(tokens, max_ngram), dtype=np.int32)
    mult = (gen.integers(1, 1 << 40, size=(layers, max_ngram), dtype=np.int64) * 2 + 1)
    vocab = gen.integers(100_000, 1_000_000, size=(layers, max_ngram - 1, tables), dtype=np.int32)
    offsets = np.cumsum(vocab.reshape(layers, -1), axis=1, dtype=np.int64).astype(np.int32) - vocab.reshape(layers, -1)
    cols = (max_ngram - 1) * tables
    ids = rotated(ids0, copies_for(ids0.nbytes + layers * tokens * cols * 4))

    def numpy_hash(i):
        h = ids[i][None].astype(np.int64) * mult[:, None, :]          # [layers, tokens, n], wrapping
        h = np.bitwise_xor.accumulate(h, axis=2)[:, :, 1:, None]      # h_n for n >= 2
        out = (h % vocab[:, None].astype(np.int64)).reshape(layers, -1, cols).astype(np.int32)
        return out + offsets[:, None, :]

    if torch:
        t_ids = [torch.from_numpy(a) for a in ids]
        t_mult, t_vocab = torch.from_numpy(mult), torch.from_numpy(vocab.astype(np.int64))
        t_offsets = torch.from_numpy(offsets)

    def torch_hash(i):
        prod = t_ids[i].unsqueeze(0).long() * t_mult.unsqueeze(1)
        h, parts = prod[:, :, 0], []
        for n in range(1, max_ngram):
            h = h ^ prod[:, :, n]
            parts.append(torch.remainder(h.unsqueeze(2), t_vocab[:, n - 1].unsqueeze(1)))
        return torch.cat(parts, dim=2).int() + t_offsets.unsqueeze(1)

    peers = {"numpy": numpy_hash}
    if torch:
        peers["torch"] = torch_hash
    return Case("engram_hash", tokens, layers, cols, ids0.nbytes + layers * tokens * cols * 4, len(ids),
                lambda i: ours(ids[i], mult, vocab, offsets), peers, _exact(numpy_hash(0)))
