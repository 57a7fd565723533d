"""tessera.tile_kernels.engram: engram_hash exact against Python integers, fused_weight exact."""
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


def test_errors_and_missing_names():
    with pytest.raises(tessera.InvalidArgumentError, match=r"engram_hash: argument 'vocab_sizes' must be positive"):
        E.engram_hash(np.zeros((2, 3), np.int32), np.ones((1, 3), np.int64), np.zeros((1, 2, 1), np.int32),
                      np.zeros((1, 2), np.int32))
    for name in E._NOT_IMPLEMENTED:
        with pytest.raises(tessera.NotImplementedInTessera, match=name):
            getattr(E, name)


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
