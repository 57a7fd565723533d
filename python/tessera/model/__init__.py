"""``tessera.model``: a DeepSeek-V3.2 model (MLA with the sparse-attention indexer, DeepSeekMoE, FP8
block-scaled weights) run on tessera's own kernels.

The config keys, checkpoint layout and numerics are those of docs/model.md. A checkpoint is a folder
with ``config.json`` and ``*.safetensors`` files; weights are memory-mapped, never copied whole.

    from tessera.model import Model
    m = Model("ckpt/")
    new_tokens = m.generate([[1, 2, 3], [4, 5]], max_new_tokens=8)   # greedy

Low-level steps work on sequence slots ``0 .. max_batch_size - 1``, each holding one sequence's caches:
``prefill(seq_ids, tokens)`` appends prompt tokens to slots, ``decode(seq_ids, tokens)`` appends one
token to each slot; both return float32 logits and, on request, the residual stream after every layer.
Results are bitwise identical for every thread count.

The sibling modules ``config``, ``random_checkpoint`` and ``reference`` (the float64 reference) are
imported on their own; this module needs only the native extension.
"""
from __future__ import annotations

import numbers
import os

import numpy as np

from .. import _C
from .._errors import ArgumentTypeError, invalid_argument

__all__ = ["Model", "STEP_COMPONENTS"]

#: Names of the per-component step times, in the order the step runs them.
STEP_COMPONENTS = ("embedding", "norms", "attn_projections", "indexer", "attention", "gate", "experts",
                   "shared", "dense_mlp", "head")


def _int(fn, arg, value, minimum=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be an int, got {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise invalid_argument(fn, arg, f"must be >= {minimum}, got {value}")
    return value


def _int_list(fn, arg, values):
    if isinstance(values, np.ndarray):
        if values.ndim != 1 or values.dtype.kind not in "iu":
            raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a 1-D integer array or a list of ints")
        return [int(v) for v in values]
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a list of ints, got {type(values).__name__}")
    return [_int(fn, f"{arg}[{i}]", v) for i, v in enumerate(values)]


def _token_lists(fn, arg, values):
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a list of token lists, got {type(values).__name__}")
    return [_int_list(fn, f"{arg}[{i}]", v) for i, v in enumerate(values)]


class Model:
    """A DeepSeek-V3.2 model loaded from a checkpoint folder.

    Args:
        path: folder with ``config.json`` and ``*.safetensors`` (docs/model.md "Checkpoint").
        max_batch_size: number of sequence slots (default: the config's ``max_batch_size``).
        max_seq_len: cache capacity per slot in tokens (default: the config's ``max_seq_len``; it may
            not exceed it). The model's numerics (YaRN, the softmax scale) always follow the config.
        ranks: expert-parallel ranks: 1, or ``ep_group``'s size (more without ``ep_group`` raises
            ``NotImplementedInTessera``).
        ep_group: expert parallelism (docs/model.md "Expert parallelism"): a ``tessera.deep_ep.Group``,
            mpi4py communicator or torch.distributed group of the ranks started by mpirun. Rank r holds
            the routed experts ``[r*E/R, (r+1)*E/R)`` and runs its own sequences; prefill and decode are
            collective (every rank calls them in the same order, a rank may pass no sequences).
        ep_max_tokens: with ``ep_group``, the most tokens one step of any rank carries (sizes the buffer).
        ep_timeout: with ``ep_group``, seconds a rank waits for a peer before it raises an error naming it.
        batch_invariant: compute every GEMM row as in a batch of >= 9 rows, so a sequence's bits do not
            depend on its batch (1 and R ranks then agree bitwise); costs small-batch decode speed.
        prefault_weights: map every page of the checkpoint at load and read one byte of each, so steps
            take no page faults (nor a hypervisor's first-touch cost) on weights they touch first (a
            routed expert's first use); for checkpoints that fit in memory.
        lock_weights: lock every page of the checkpoint in memory (mlock; implies ``prefault_weights``),
            so the kernel may not page weights out between steps. Needs ``ulimit -l`` above the
            checkpoint's size or CAP_IPC_LOCK; otherwise the load raises ``TesseraRuntimeError`` saying so.

    Raises ``InvalidArgumentError`` naming the file, tensor or config key for a bad checkpoint.
    """

    def __init__(self, path, max_batch_size: int | None = None, max_seq_len: int | None = None, ranks: int = 1, *,
                 ep_group=None, ep_max_tokens: int | None = None, ep_timeout: float = 300.0,
                 batch_invariant: bool = False, prefault_weights: bool = False, lock_weights: bool = False):
        fn = "tessera.model.Model"
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentTypeError(f"{fn}: argument 'path' must be a path, got {type(path).__name__}")
        mb = 0 if max_batch_size is None else _int(fn, "max_batch_size", max_batch_size, 1)
        ms = 0 if max_seq_len is None else _int(fn, "max_seq_len", max_seq_len, 1)
        native_group, max_tokens = None, 0
        if ep_group is not None:
            if ep_max_tokens is None:
                raise invalid_argument(fn, "ep_max_tokens", "is required with 'ep_group'")
            max_tokens = _int(fn, "ep_max_tokens", ep_max_tokens, 1)
            from tessera.deep_ep import _group
            native_group = _group.resolve(ep_group, fn=fn)._native
        self._m = _C.Model(os.fspath(path), mb, ms, _int(fn, "ranks", ranks, 1), native_group, max_tokens,
                           float(ep_timeout), bool(batch_invariant), bool(prefault_weights), bool(lock_weights))
        self._config = self._m.config()

    @property
    def config(self) -> dict:
        """The parsed config (every key of docs/model.md, defaults filled in)."""
        return dict(self._config)

    @property
    def max_batch_size(self) -> int:
        """Number of sequence slots."""
        return self._m.max_batch_size

    @property
    def max_seq_len(self) -> int:
        """Cache capacity of each slot, in tokens."""
        return self._m.max_seq_len

    def seq_len(self, seq_id: int) -> int:
        """Tokens cached in slot ``seq_id`` so far."""
        return self._m.seq_len(_int("tessera.model.Model.seq_len", "seq_id", seq_id))

    def reset(self, seq_id: int | None = None) -> None:
        """Empties slot ``seq_id`` (every slot when None); its cache is reused by the next prefill."""
        if seq_id is None:
            self._m.reset_all()
        else:
            self._m.reset(_int("tessera.model.Model.reset", "seq_id", seq_id))

    @staticmethod
    def _result(logits, hidden, topk, return_hidden, return_topk):
        extras = ([hidden] if return_hidden else []) + ([topk] if return_topk else [])
        return (logits, *extras) if extras else logits

    def prefill(self, seq_ids, tokens, return_hidden: bool = False, all_tokens: bool = False,
                return_topk: bool = False):
        """Appends ``tokens[i]`` (a non-empty list of token ids) to slot ``seq_ids[i]`` and runs them.

        A slot may already hold tokens (chunked prefill); every new token attends to the slot's whole
        cache as the indexer selects. Slots must be distinct.

        Returns ``logits``: float32 ``[len(seq_ids), vocab_size]`` for the last token of each sequence,
        or ``[total_tokens, vocab_size]`` in sequence order with ``all_tokens``. With ``return_hidden``
        and/or ``return_topk`` it returns a tuple ``(logits, hidden, topk)`` holding the ones asked for:
        ``hidden`` float32 ``[n_layers, total_tokens, dim]``, the residual stream after every layer for
        every new token; ``topk`` int32 ``[n_layers, total_tokens, index_topk]``, the positions each
        layer's indexer selected (ascending, then -1 past the ``min(index_topk, pos + 1)`` selected).
        """
        fn = "tessera.model.Model.prefill"
        ids = _int_list(fn, "seq_ids", seq_ids)
        toks = _token_lists(fn, "tokens", tokens)
        extras = bool(return_hidden) or bool(return_topk)
        logits, hidden, topk = self._m.prefill(ids, toks, bool(all_tokens) or extras, extras)
        if extras and not all_tokens:
            last = np.cumsum([len(t) for t in toks], dtype=np.int64) - 1  # int even for no sequences
            logits = np.ascontiguousarray(logits[last])
        return self._result(logits, hidden, topk, return_hidden, return_topk)

    def decode(self, seq_ids, tokens, return_hidden: bool = False, return_topk: bool = False):
        """Appends one token ``tokens[i]`` to each slot ``seq_ids[i]`` (each already prefilled) and runs
        them as one batch over the paged caches.

        Returns ``logits`` (float32 ``[len(seq_ids), vocab_size]``), or a tuple with ``hidden`` (float32
        ``[n_layers, len(seq_ids), dim]``) and/or ``topk`` (int32 ``[n_layers, len(seq_ids),
        index_topk]``) as in ``prefill``.
        """
        fn = "tessera.model.Model.decode"
        extras = bool(return_hidden) or bool(return_topk)
        logits, hidden, topk = self._m.decode(_int_list(fn, "seq_ids", seq_ids), _int_list(fn, "tokens", tokens),
                                              extras)
        return self._result(logits, hidden, topk, return_hidden, return_topk)

    def forward(self, seq_ids, tokens, return_hidden: bool = False):
        """One step: ``decode`` when ``tokens`` is a flat list (one token per slot), else ``prefill``."""
        if len(tokens) > 0 and all(isinstance(t, (numbers.Integral, np.integer)) for t in tokens):
            return self.decode(seq_ids, tokens, return_hidden)
        return self.prefill(seq_ids, tokens, return_hidden)

    def generate(self, prompts, max_new_tokens: int) -> list:
        """Greedy generation: empties slots ``0 .. len(prompts) - 1``, prefills the prompts, then decodes
        ``max_new_tokens`` tokens for each (argmax, lowest token id on ties). Returns the new tokens,
        one list per prompt."""
        fn = "tessera.model.Model.generate"
        toks = _token_lists(fn, "prompts", prompts)
        return self._m.generate(toks, _int(fn, "max_new_tokens", max_new_tokens, 0))

    def step_times(self) -> dict:
        """Seconds spent in each component (``STEP_COMPONENTS``) by the last prefill or decode step."""
        return self._m.last_step_times()

    def fill_synthetic_context(self, seq_id: int, length: int, seed: int = 0) -> None:
        """For benchmarks: slot ``seq_id`` holds ``length`` tokens of random cache content (valid FP8
        latents and indexer keys) without running the model, so decode steps at a long context can be
        timed without its prefill."""
        fn = "tessera.model.Model.fill_synthetic_context"
        self._m.fill_synthetic_context(_int(fn, "seq_id", seq_id, 0), _int(fn, "length", length, 0),
                                       _int(fn, "seed", seed, 0))
