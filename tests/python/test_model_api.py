"""tessera.model.Model's Python surface on a tiny random checkpoint: argument checks, result shapes and
dtypes, the indexer selections it returns, slot bookkeeping, step times and the not-implemented ranks.
(test_model.py checks the numbers against the float64 reference.)"""
import os

import numpy as np
import pytest

from model_helpers import STEP_COMPONENTS, Model, needs_runner, tiny_checkpoint
from tessera import ArgumentTypeError, InvalidArgumentError, NotImplementedInTessera

pytestmark = needs_runner


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory, "model_api", seed=3)


def test_shapes_dtypes_and_selections(checkpoint):
    path, c = checkpoint
    m = Model(path, max_batch_size=3, max_seq_len=64)
    assert (m.max_batch_size, m.max_seq_len) == (3, 64)
    assert m.config["dim"] == c["dim"] and m.config["scale_fmt"] == c["scale_fmt"]
    prompts = [list(range(1, 21)), [7, 8, 9]]
    logits = m.prefill([0, 2], prompts)
    assert logits.shape == (2, c["vocab_size"]) and logits.dtype == np.float32
    assert (m.seq_len(0), m.seq_len(1), m.seq_len(2)) == (20, 0, 3)
    out = m.decode(np.array([0, 2]), [1, 2], return_hidden=True, return_topk=True)
    logits, hidden, topk = out
    assert hidden.shape == (c["n_layers"], 2, c["dim"]) and hidden.dtype == np.float32
    assert topk.shape == (c["n_layers"], 2, c["index_topk"]) and topk.dtype == np.int32
    # Each row selects min(index_topk, context) distinct earlier positions, ascending, then -1.
    for layer in range(c["n_layers"]):
        for row, context in ((0, 21), (1, 4)):
            sel = topk[layer, row]
            n = min(c["index_topk"], context)
            assert (sel[n:] == -1).all()
            assert (np.diff(sel[:n]) > 0).all() and sel[0] >= 0 and sel[n - 1] < context
            assert context - 1 in sel[:n] or n == c["index_topk"]
    # Prefill with all_tokens returns every token's logits; the last ones match the default call.
    m.reset()
    all_logits = m.prefill([1], [prompts[0]], all_tokens=True)
    assert all_logits.shape == (20, c["vocab_size"])
    m.reset(1)
    last, hidden = m.prefill([1], [prompts[0]], return_hidden=True)
    assert last.shape == (1, c["vocab_size"]) and hidden.shape == (c["n_layers"], 20, c["dim"])
    np.testing.assert_array_equal(last[0], all_logits[-1])
    assert m.forward([1], [5]).shape == (1, c["vocab_size"])  # a flat token list decodes
    assert set(m.step_times()) == set(STEP_COMPONENTS) and all(t >= 0 for t in m.step_times().values())


def test_generate_is_prefill_then_argmax_decode(checkpoint):
    path, c = checkpoint
    m = Model(path)
    got = m.generate([[3, 1, 4, 1, 5], [9, 2]], 3)
    assert [len(g) for g in got] == [3, 3] and all(isinstance(t, int) for g in got for t in g)
    m.reset()
    logits = m.prefill([0, 1], [[3, 1, 4, 1, 5], [9, 2]])
    want = [[], []]
    for step in range(3):
        tokens = [int(np.argmax(row)) for row in logits]
        for i, t in enumerate(tokens):
            want[i].append(t)
        if step < 2:
            logits = m.decode([0, 1], tokens)
    assert got == want


def _locked_kb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmLck:"))


def test_prefault_and_lock_weights_give_the_same_tokens(checkpoint):
    path, _ = checkpoint
    prompts = [[3, 1, 4, 1, 5], [9, 2]]
    want = Model(path).generate(prompts, 3)
    assert Model(path, prefault_weights=True).generate(prompts, 3) == want
    files = [os.path.join(path, f) for f in os.listdir(path) if f.endswith(".safetensors")]
    before = _locked_kb()
    try:
        locked = Model(path, lock_weights=True)
    except RuntimeError as e:  # a locked-memory limit below the checkpoint's size, without CAP_IPC_LOCK
        assert "mlock" in str(e) and "ulimit -l" in str(e)
        return
    assert _locked_kb() - before >= sum(os.path.getsize(f) for f in files) // 1024
    assert locked.generate(prompts, 3) == want


def test_bad_arguments_are_named(checkpoint):
    path, c = checkpoint
    m = Model(path, max_batch_size=2, max_seq_len=32)
    with pytest.raises(ArgumentTypeError, match="argument 'seq_ids'"):
        m.prefill(0, [[1]])
    with pytest.raises(ArgumentTypeError, match=r"argument 'tokens\[0\]\[1\]' must be an int"):
        m.prefill([0], [[1, 2.5]])
    with pytest.raises(ArgumentTypeError, match="argument 'max_new_tokens' must be an int"):
        m.generate([[1]], "3")
    with pytest.raises(InvalidArgumentError, match="slot 5 is outside"):
        m.prefill([5], [[1]])
    with pytest.raises(InvalidArgumentError, match="is empty; prefill it first"):
        m.decode([1], [3])
    with pytest.raises(InvalidArgumentError, match="more than max_seq_len = 32"):
        m.prefill([0], [list(range(33))])
    with pytest.raises(InvalidArgumentError, match="outside \\[0, vocab_size"):
        m.prefill([0], [[c["vocab_size"]]])
    with pytest.raises(InvalidArgumentError, match="argument 'max_seq_len' must be in"):
        Model(path, max_seq_len=c["max_seq_len"] + 1)
    with pytest.raises(InvalidArgumentError, match="max_batch_size' must be >= 1"):
        Model(path, max_batch_size=0)
    with pytest.raises(NotImplementedInTessera, match="expert parallelism"):
        Model(path, ranks=2)
    with pytest.raises(InvalidArgumentError, match="no config.json"):
        Model(os.path.dirname(path))
