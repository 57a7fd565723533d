"""What `tessera bench model` relies on: the checkpoint writer's reuse check and the synthetic context
that stands in for a long prefill."""
import os

import numpy as np
import pytest

from model_helpers import Model, needs_runner, tiny_checkpoint
from tessera import InvalidArgumentError
from tessera.model.random_checkpoint import checkpoint_is_current, write_random_checkpoint

pytestmark = needs_runner


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory, "model_bench_tools", seed=5)


def test_reuse_check(tiny, tmp_path):
    path, config = tiny
    assert checkpoint_is_current(config, path)
    assert not checkpoint_is_current(dict(config, max_seq_len=config["max_seq_len"] * 2), path)
    assert not checkpoint_is_current(config, tmp_path)  # empty folder
    # A file cut short (a write that was stopped) is not current.
    write_random_checkpoint(config, tmp_path, seed=5)
    st = os.path.join(tmp_path, "model.safetensors")
    with open(st, "r+b") as f:
        f.truncate(os.path.getsize(st) - 1)
    assert not checkpoint_is_current(config, tmp_path)


def test_synthetic_context_then_decode(tiny):
    path, config = tiny
    m = Model(path, max_batch_size=2, max_seq_len=300)
    m.fill_synthetic_context(0, 257, seed=1)
    m.fill_synthetic_context(1, 40, seed=2)
    assert (m.seq_len(0), m.seq_len(1)) == (257, 40)
    logits = m.decode([0, 1], [3, 4])
    assert logits.shape == (2, config["vocab_size"]) and np.isfinite(logits).all()
    assert (m.seq_len(0), m.seq_len(1)) == (258, 41)
    # The same content for the same seed: the step is repeatable.
    m.fill_synthetic_context(0, 257, seed=1)
    m.fill_synthetic_context(1, 40, seed=2)
    assert np.array_equal(m.decode([0, 1], [3, 4]), logits)
    with pytest.raises(InvalidArgumentError, match="fill_synthetic_context.*'len'"):
        m.fill_synthetic_context(0, 301)
    with pytest.raises(InvalidArgumentError, match="slot"):
        m.fill_synthetic_context(2, 10)


def test_synthetic_context_same_for_any_thread_count(tiny):
    # The fill is split over the pool; each position's entries depend on its own key only.
    import tessera

    path, _ = tiny
    m = Model(path, max_batch_size=1, max_seq_len=300)
    before = tessera.num_threads()
    logits = []
    try:
        for threads in (1, 3):
            tessera.set_num_threads(threads)
            m.fill_synthetic_context(0, 293, seed=7)
            tessera.set_num_threads(1)  # the step itself on one thread both times
            logits.append(m.decode([0], [5]))
    finally:
        tessera.set_num_threads(before)
    assert np.array_equal(logits[0], logits[1])


def test_code_lookup_by_pairs_matches_the_code_table():
    from tessera.model import random_checkpoint as rc

    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 7, 4096, 12345):
        draws = rng.integers(0, 256, size=n, dtype=np.uint8)
        assert np.array_equal(rc._codes_of(draws), rc._CODE_TABLE[draws]), n


def test_checkpoint_bytes_do_not_depend_on_the_chunk_size(tiny, tmp_path, monkeypatch):
    from tessera.model import random_checkpoint as rc

    path, config = tiny  # written with the default chunk size, seed 5
    monkeypatch.setattr(rc, "_CHUNK_BYTES", 1000)  # every tensor in many chunks, row by row
    write_random_checkpoint(config, tmp_path, seed=5)
    with open(os.path.join(path, "model.safetensors"), "rb") as a, open(os.path.join(tmp_path, "model.safetensors"), "rb") as b:
        assert a.read() == b.read()
