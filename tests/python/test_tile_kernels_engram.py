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
