"""The DeepSeek-V3.2 runner (tessera.model) against the float64 reference of docs/model.md
(model_reference.py) on tiny random checkpoints: per-layer hidden states and logits of a batched
prefill and the decode steps after it, greedy tokens, thread-count invariance and named errors."""
import inspect
import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import model_reference as ref
import tessera
from tessera import InvalidArgumentError, NotImplementedInTessera
from tessera.model.random_checkpoint import write_random_checkpoint
from tessera.model.safetensors_io import read_checkpoint_tensors, write_safetensors

try:
    from tessera.model import Model
except ImportError:
    Model = None

pytestmark = pytest.mark.skipif(Model is None or not hasattr(tessera._C, "Model"),
                                reason="tessera.model.Model needs the native runner (_C.Model), absent from this build")

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "..", "python", "tessera", "model", "configs", "tiny.json")

# How runner and reference can differ. The runner computes in f32 where the reference uses float64
# (the reference follows the bf16 attention probabilities of tessera's FlashMLA kernels where this CPU
# runs them), so most rows (one token's hidden state) agree to ~1e-7. Each FP8 re-quantisation of an
# activation can turn that noise into a flipped e4m3 code: one step of 2^-4 in one element. Flips
# compound: a row perturbed by e flips about e/2^-4 of the next quantisation's codes, an error of
# sqrt(e * 2^-4), and attention spreads a changed cache row to every later query, so one flip grows to
# a few percent within a layer (2^-4 is where this settles; bf16 roundings do the same around 2^-8).
# The test therefore compares layer by layer: the reference runs each layer on the runner's input to
# that layer (teacher_forced) and attends the keys the runner's indexer chose, so a difference cannot
# grow past one layer and a near-tied choice taken differently cannot move a row. Measured on these
# configs over 5 prompt seeds: 58-99% of a layer's rows within 1e-7, the rest at most 3.1% (FP8) or
# 0.53% (bf16 weights). EXACT, for MIN_EXACT_SHARE of the rows, catches a systematic difference (a
# rounding step done differently moves every row by far more); TIGHT bounds MIN_TIGHT_SHARE of them;
# LOOSE every row, as a near-tied MoE routing choice can take another expert.
EXACT = 1e-5
MIN_EXACT_SHARE = 0.3
TIGHT = {"fp8": 0.05, "bf16": 0.01}
MIN_TIGHT_SHARE = 0.85
LOOSE = 0.5
# The head alone (final RMSNorm and lm_head) has no quantisation: f32 against float64.
HEAD_TIGHT = 1e-4
# The runner's greedy token must be the reference's wherever the reference's top-2 logit margin (given
# the runner's input to the last layer) exceeds this; logits have std ~1, a row error of 5% moves one
# logit by up to ~0.3.
MARGIN = {"fp8": 0.3, "bf16": 0.1}
# The runner's indexer may choose differently from the reference only between keys whose reference
# scores lie within INDEX_TIE (relative to the largest score) of the k-th: one flipped FP8 code of a
# query or key moves a score by ~2^-4 / sqrt(128) of its size. At most MAX_DIFFERING_SELECTIONS of the
# (layer, token) choices may differ.
INDEX_TIE = 0.02
MAX_DIFFERING_SELECTIONS = 0.15


def tiny(**overrides):
    with open(TINY) as f:
        return {**json.load(f), **overrides}


CONFIGS = {
    # tiny.json: YaRN (max_seq_len 512 > original_seq_len 128), ue8m0 scales, sigmoid routing over 2 groups
    "yarn": tiny(),
    # no YaRN, amax/448 scales, softmax routing over 4 groups keeping 2, 3 layers, 2 shared experts
    "plain": tiny(max_seq_len=128, scale_fmt=None, score_func="softmax", n_expert_groups=4, n_limited_groups=2,
                  n_activated_experts=3, n_shared_experts=2, n_layers=3, route_scale=1.0),
    # bf16 linear weights (no FP8 re-quantisation), a shorter index_topk
    "bf16": tiny(dtype="bf16", scale_fmt=None, index_topk=12),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def checkpoint(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    write_random_checkpoint(CONFIGS[request.param], out, seed=7 + sorted(CONFIGS).index(request.param), num_files=2)
    return request.param, str(out)


def kernels_round_probabilities():
    """Whether FlashMLA runs its bf16 kernel sets here (they round p to bf16; the fp32 sets do not)."""
    return tessera.cpu_info()["active_isa"] in ("amx", "avx512bf16")


def open_pair(path):
    try:
        runner = Model(path)
    except NotImplementedInTessera as e:
        pytest.skip(f"the runner does not implement this config: {e}")
    return runner, ref.ReferenceModel(path, bf16_probabilities=kernels_round_probabilities())


def row_errors(got, want):
    """Relative L2 error of each row (last axis)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return np.linalg.norm(got - want, axis=-1) / np.maximum(np.linalg.norm(want, axis=-1), 1e-30)


def assert_rows_close(err, tight, what):
    """``err``: relative errors of rows (all sequences of a batch, one layer)."""
    err = np.asarray(err)
    exact_share, tight_share = np.mean(err <= EXACT), np.mean(err <= tight)
    assert exact_share >= MIN_EXACT_SHARE and tight_share >= MIN_TIGHT_SHARE and err.max() <= LOOSE, (
        f"{what}: {exact_share:.0%} of rows within {EXACT} (need {MIN_EXACT_SHARE:.0%}), {tight_share:.0%} within "
        f"{tight} (need {MIN_TIGHT_SHARE:.0%}), worst {err.max():.3g}, median {np.median(err):.3g}")


def random_prompts(config, lengths, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, config["vocab_size"], n).tolist() for n in lengths]


def reports_topk():
    """Whether the runner can return its indexer's choices (prefill/decode ``return_topk``)."""
    return "return_topk" in inspect.signature(Model.prefill).parameters


def run_greedy(runner, prompts, decode_steps, with_topk=False):
    """The runner's batched prefill (slots 0..) then decode_steps greedy steps. Returns per sequence
    (tokens fed [T], hidden [n_layers, T, dim], logits [T, vocab], the indexer's choices
    [n_layers, T, index_topk] or None)."""
    slots = list(range(len(prompts)))
    extra = {"return_topk": True} if with_topk else {}
    out = runner.prefill(slots, prompts, all_tokens=True, return_hidden=True, **extra)
    logits, hidden, topk = out[0], out[1], (out[2] if with_topk else None)
    assert logits.shape[0] == hidden.shape[1] == sum(len(p) for p in prompts)
    bounds = np.cumsum([0] + [len(p) for p in prompts])
    seqs = [(list(p), [hidden[:, b:e]], [logits[b:e]], [topk[:, b:e]] if with_topk else None)
            for p, b, e in zip(prompts, bounds[:-1], bounds[1:])]
    for _ in range(decode_steps):
        chosen = [int(np.argmax(s[2][-1][-1])) for s in seqs]
        out = runner.decode(slots, chosen, return_hidden=True, **extra)
        for i, (tokens, hs, ls, ts) in enumerate(seqs):
            tokens.append(chosen[i])
            hs.append(out[1][:, i:i + 1])
            ls.append(out[0][i:i + 1])
            if with_topk:
                ts.append(out[2][:, i:i + 1])
    return [(tokens, np.concatenate(hs, axis=1), np.concatenate(ls), np.concatenate(ts, axis=1) if ts else None)
            for tokens, hs, ls, ts in seqs]


def assert_selections_agree(topk, reference, what):
    """The runner's indexer choices against the reference's on the same inputs (teacher_forced): a
    different choice must be a near tie of the reference's index scores, and rare."""
    rows = differing = 0
    for layer, (own, scores) in enumerate(zip(reference.last_topk, reference.last_index_scores)):
        for row, (want, score) in enumerate(zip(own, scores)):
            got = np.sort(topk[layer][row][topk[layer][row] >= 0])
            rows += 1
            assert len(got) == len(want) and (len(got) == 0 or got.max() <= row), f"{what}: layer {layer} row {row}"
            if np.array_equal(got, want):
                continue
            differing += 1
            kth = np.sort(score)[-len(want)]
            others = np.setdiff1d(got, want)
            assert np.all(score[others] >= kth - INDEX_TIE * np.abs(score).max()), (
                f"{what}: layer {layer} row {row} attends {others} scored {score[others]} below the k-th {kth}")
    assert differing <= MAX_DIFFERING_SELECTIONS * rows, f"{what}: {differing} of {rows} selections differ"


def test_layers_match_reference(checkpoint):
    name, path = checkpoint
    runner, reference = open_pair(path)
    topk, dtype = reference.config["index_topk"], reference.config["dtype"]
    # 3 prompts of different lengths (the longer past index_topk, so the indexer selects) and 3 decode steps
    prompts = random_prompts(reference.config, (5, topk + 6, 2 * topk + 9), seed=1)
    compared, layer_errors = 0, {}
    for tokens, hidden, logits, chosen_keys in run_greedy(runner, prompts, decode_steps=3, with_topk=reports_topk()):
        what = f"{name}, a {len(tokens)}-token sequence"
        # With the runner's indexer choices the reference attends the same keys, so a near tie taken
        # differently does not move a row; the choices themselves are checked on their own.
        want_hidden, want_logits = reference.teacher_forced(tokens, hidden, topk=chosen_keys)
        if chosen_keys is not None:
            assert_selections_agree(chosen_keys, reference, what)
        for layer in range(hidden.shape[0]):
            layer_errors.setdefault(layer, []).extend(row_errors(hidden[layer], want_hidden[layer]))
        head_err = row_errors(logits, reference.head(hidden[-1]))
        assert head_err.max() <= HEAD_TIGHT, f"{what}: head error {head_err.max():.3g}"
        # the runner's greedy choices (the tokens fed after the prompt, and the last step's argmax)
        n = len(tokens) - 3
        chosen = tokens[n:] + [int(np.argmax(logits[-1]))]
        for row, token in zip(range(n - 1, len(tokens)), chosen):
            top2 = np.sort(want_logits[row])[-2:]
            if top2[1] - top2[0] > MARGIN[dtype]:
                assert token == int(np.argmax(want_logits[row])), f"{what}: greedy token at row {row}"
                compared += 1
    for layer, errors in layer_errors.items():
        assert_rows_close(errors, TIGHT[dtype], f"{name}, layer {layer}")
    assert compared >= 2, f"{name}: too few greedy steps had a margin above {MARGIN[dtype]} to compare"


def test_generate_is_greedy_prefill_then_decode(checkpoint):
    name, path = checkpoint
    if name != "yarn":
        pytest.skip("one config suffices")
    runner, reference = open_pair(path)
    prompts = random_prompts(reference.config, (7, 2, 30), seed=5)
    want = [tokens[len(p):] for p, (tokens, _, _, _) in zip(prompts, run_greedy(runner, prompts, decode_steps=4))]
    runner.reset()
    got = runner.generate(prompts, 4)
    assert [list(g)[:4] for g in got] == want
    assert all(len(g) == 4 for g in got)


_THREAD_SCRIPT = textwrap.dedent("""
    import hashlib, sys
    import numpy as np
    from tessera.model import Model
    model = Model(sys.argv[1])
    prompts = [list(range(3, 40)), list(range(100, 107)), list(range(200, 222))]
    digest = hashlib.sha256()
    logits, hidden = model.prefill([0, 1, 2], prompts, all_tokens=True, return_hidden=True)
    digest.update(np.ascontiguousarray(logits).tobytes()); digest.update(np.ascontiguousarray(hidden).tobytes())
    for step in range(3):
        tokens = [int(t) for t in np.argmax(logits[-3:] if step else logits[[36, 43, 65]], axis=-1)]
        logits, hidden = model.decode([0, 1, 2], tokens, return_hidden=True)
        digest.update(np.ascontiguousarray(logits).tobytes()); digest.update(np.ascontiguousarray(hidden).tobytes())
    print(digest.hexdigest())
""")


def test_one_and_two_threads_give_identical_bits(checkpoint):
    name, path = checkpoint
    if name != "yarn":
        pytest.skip("one config suffices for thread invariance")
    digests = []
    for threads in ("1", "2"):
        env = {**os.environ, "TESSERA_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-c", _THREAD_SCRIPT, path], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        digests.append(done.stdout.strip())
    assert digests[0] == digests[1] and len(digests[0]) == 64


# ---- named errors


_SAFETENSORS_DTYPE = {"float8_e4m3fn": "F8_E4M3", "bfloat16": "BF16", "float32": "F32"}


def rewrite_checkpoint(source, out, config=None, drop=(), replace=None):
    """A copy of a checkpoint with some tensors dropped or replaced (name -> (dtype, array))."""
    os.makedirs(out, exist_ok=True)
    tensors = {n: (_SAFETENSORS_DTYPE[str(a.dtype)], a) for n, a in read_checkpoint_tensors(source).items()
               if n not in drop}
    tensors.update(replace or {})
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    if config is None:
        with open(os.path.join(source, "config.json")) as f:
            config = json.load(f)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f)
    return str(out)


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("errors")
    write_random_checkpoint(tiny(n_routed_experts=4, n_expert_groups=1, n_limited_groups=1), out, seed=1)
    return str(out)


def test_missing_tensor_is_named(small_checkpoint, tmp_path):
    for name in ("model.layers.1.mlp.experts.3.down_proj.weight_scale_inv", "model.layers.0.self_attn.indexer.wk.weight"):
        broken = rewrite_checkpoint(small_checkpoint, tmp_path / name, drop={name})
        with pytest.raises(InvalidArgumentError, match=name.replace(".", r"\.")):
            Model(broken)


def test_wrong_shape_is_named(small_checkpoint, tmp_path):
    name = "model.layers.0.self_attn.o_proj.weight"
    bad = np.zeros((512, 256), dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)  # transposed
    broken = rewrite_checkpoint(small_checkpoint, tmp_path / "shape", replace={name: ("F8_E4M3", bad)})
    with pytest.raises(InvalidArgumentError, match=name.replace(".", r"\.")):
        Model(broken)
    name = "model.norm.weight"
    broken = rewrite_checkpoint(small_checkpoint, tmp_path / "dtype", replace={name: ("F8_E4M3", np.ones(256, np.float32).astype(ml_dtypes.float8_e4m3fn))})
    with pytest.raises(InvalidArgumentError, match=name.replace(".", r"\.")):
        Model(broken)


@pytest.mark.parametrize("key, value", [("bogus_key", 1), ("dim", 200), ("kv_lora_rank", 256),
                                        ("score_func", "relu"), ("n_limited_groups", 5)])
def test_bad_config_is_named(small_checkpoint, tmp_path, key, value):
    with open(os.path.join(small_checkpoint, "config.json")) as f:
        config = json.load(f)
    config[key] = value
    broken = rewrite_checkpoint(small_checkpoint, tmp_path / "config", config=config)
    with pytest.raises(InvalidArgumentError, match=key):
        Model(broken)
