"""DeepGEMM's Mega MoE on the CPU: one call runs a whole expert-parallel MoE layer across the ranks of
a group (dispatch, expert GEMM 1, SwiGLU, re-quantisation, expert GEMM 2, weighted combine). Names,
arguments and defaults follow DeepGEMM's ``deep_gemm/mega``; docs/gemm.md "Mega MoE" has the details.

The group is what ``tessera.deep_ep`` takes (a ``tessera.deep_ep.Group``, an mpi4py communicator or a
torch.distributed group of a job started by mpirun); ``None`` or any group of one rank runs without
MPI. The ranks must share one host (their buffers are POSIX shared memory every rank maps).

The buffer's views ``x``, ``x_sf``, ``topk_idx`` and ``topk_weights`` are numpy arrays, or torch
tensors when the group is a torch.distributed group; they share the buffer's memory. DeepGEMM's
GPU staging views ``l1_acts``, ``l1_acts_sf``, ``l2_acts`` and ``l2_acts_sf`` are None here: the CPU
keeps those per work item, in private memory.

``transform_weights_for_mega_moe`` keeps the CPU layout: gate rows [0, I) and up rows [I, 2I) of
the first GEMM's weights stay in two halves (the CPU's SwiGLU reads both halves of a row at once, so
DeepGEMM's interleaving in groups of 8 brings nothing), data K-major contiguous, scale factors
K-major contiguous (packed UE8M0 int32 or float32, per 32 along K).
"""
import numbers
import types
import warnings

import ml_dtypes
import numpy as np

from .. import _C
from .._arrays import is_torch_tensor, like, optional_ref, to_ref
from .._errors import InvalidArgumentError
from ..deep_ep._group import Group, _is_torch_group, resolve

_GET = "get_symm_buffer_for_mega_moe"


def _check_activation(fn: str, activation) -> None:
    if activation != "swiglu":
        raise InvalidArgumentError(f"{fn}: argument 'activation' must be 'swiglu', got {activation!r}")


def _check_int(fn: str, arg: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{fn}: argument '{arg}' must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(f"{fn}: argument '{arg}' must be >= {minimum}, got {value}")
    return int(value)


def _group_size(group) -> int:
    return 1 if group is None else int(group.size())


def _native_group(group):
    """The native EpGroup behind ``group``, or None for one rank (no MPI needed)."""
    if group is None or _group_size(group) == 1:
        return None
    return resolve(group, fn=_GET)._native


class SymmBuffer:
    """One rank's Mega MoE buffer. The caller fills ``x[:n]`` (and ``x_sf[:n]`` for fp8xfp4),
    ``topk_idx[:n]`` and ``topk_weights[:n]`` before each fused call with ``y`` of n rows."""

    def __init__(self, group, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                 intermediate_hidden: int, num_ring_tokens: int, mma_type: str = "fp8xfp4",
                 activation: str = "swiglu"):
        _check_activation("SymmBuffer", activation)
        if mma_type not in ("fp8xfp4", "bf16xbf16"):
            raise InvalidArgumentError(f"SymmBuffer: argument 'mma_type' must be 'fp8xfp4' or 'bf16xbf16', "
                                       f"got {mma_type!r}")
        if group is not None and not (isinstance(group, Group) or _is_torch_group(group) or hasattr(group, "py2f")):
            raise TypeError("SymmBuffer: argument 'group' must be a tessera.deep_ep.Group, an mpi4py communicator, "
                            f"a torch.distributed ProcessGroup or None, got {type(group).__name__}")
        self.group = group
        self.num_experts = _check_int("SymmBuffer", "num_experts", num_experts, 1)
        self.num_max_tokens_per_rank = _check_int("SymmBuffer", "num_max_tokens_per_rank", num_max_tokens_per_rank, 0)
        self.num_topk = _check_int("SymmBuffer", "num_topk", num_topk, 1)
        self.hidden = _check_int("SymmBuffer", "hidden", hidden, 1)
        self.intermediate_hidden = _check_int("SymmBuffer", "intermediate_hidden", intermediate_hidden, 1)
        self.num_ring_tokens = int(num_ring_tokens)
        self.mma_type = mma_type
        self._native = _C.MegaMoeBuffer.create(_native_group(group), self.num_experts, self.num_max_tokens_per_rank,
                                               self.num_topk, self.hidden, self.intermediate_hidden, mma_type)
        memory = self._native.memory()
        self.buffer = self._as_caller_array(memory.view(np.int8))
        self.handle = types.SimpleNamespace(buffer_ptrs=[memory.__array_interface__["data"][0]])
        fp8 = mma_type == "fp8xfp4"
        offsets, t, h, k = self._native.offsets(), self.num_max_tokens_per_rank, self.hidden, self.num_topk

        def view(name, dtype, shape):
            dtype = np.dtype(dtype)
            count = int(np.prod(shape))
            flat = memory[offsets[name]:offsets[name] + count * dtype.itemsize].view(dtype)
            return self._as_caller_array(flat.reshape(shape))

        self.x = view("x", ml_dtypes.float8_e4m3fn if fp8 else ml_dtypes.bfloat16, (t, h))
        self.x_sf = view("x_sf", np.int32, (t, h // 128)) if fp8 else None
        self.topk_idx = view("topk_idx", np.int64, (t, k))
        self.topk_weights = view("topk_weights", np.float32, (t, k))
        self.l1_acts = self.l1_acts_sf = self.l2_acts = self.l2_acts_sf = None

    def _as_caller_array(self, array):
        if _is_torch_group(self.group):
            import torch  # the caller's group is a torch one, so torch is loaded already
            return like(array, torch.empty(0))
        return array

    def native(self, fn: str):
        if self._native is None:
            raise InvalidArgumentError(f"{fn}: argument 'sym_buffer' was destroyed")
        return self._native

    def destroy(self) -> None:
        self.handle = self.buffer = self.group = None
        self.x = self.x_sf = self.topk_idx = self.topk_weights = None
        self._native = None


def get_symm_buffer_for_mega_moe(group, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                                 intermediate_hidden: int, use_fp8_dispatch=None, mma_type: str = "fp8xfp4",
                                 activation: str = "swiglu") -> SymmBuffer:
    """A SymmBuffer for ``num_max_tokens_per_rank`` tokens per rank (collective over the group). The CPU
    needs no token alignment, so the count is kept as given. ``use_fp8_dispatch`` is DeepGEMM's
    deprecated spelling of ``mma_type`` (it must agree with it)."""
    if use_fp8_dispatch is not None:
        if bool(use_fp8_dispatch) != (str(mma_type).split("x")[0] == "fp8"):
            raise InvalidArgumentError(f"{_GET}: argument 'use_fp8_dispatch'={use_fp8_dispatch!r} contradicts "
                                       f"mma_type={mma_type!r}")
        warnings.warn("`use_fp8_dispatch` will be deprecated in the future, please use `mma_type`",
                      DeprecationWarning, stacklevel=2)
    num_ranks = _group_size(group)
    # The most (token, slot) pairs one rank can receive: DeepGEMM's ring holds the expert activations in
    # flight; the CPU keeps them per work item, so this is informational only.
    experts_per_rank = max(1, int(num_experts) // max(1, num_ranks))
    num_ring_tokens = num_ranks * int(num_max_tokens_per_rank) * min(int(num_topk), experts_per_rank)
    return SymmBuffer(group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                      num_ring_tokens, mma_type=mma_type, activation=activation)


def _contiguous(x):
    if is_torch_tensor(x):
        return x.contiguous()
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    raise TypeError(f"transform_weights_for_mega_moe: weights must be numpy arrays or torch CPU tensors, "
                    f"got {type(x).__name__}")


def transform_weights_for_mega_moe(l1_weights, l2_weights, activation: str = "swiglu"):
    """The weights in the layout the fused calls read: (data, sf) pairs for fp8xfp4, plain arrays for
    bf16xbf16, each made contiguous (K-major). The gate/up halves of ``l1_weights`` are kept as given
    (see the module docstring). Returns (l1, l2) of the caller's array kind."""
    _check_activation("transform_weights_for_mega_moe", activation)
    if isinstance(l1_weights, tuple) != isinstance(l2_weights, tuple):
        raise InvalidArgumentError("transform_weights_for_mega_moe: arguments 'l1_weights' and 'l2_weights' must "
                                   "both be (data, sf) pairs (fp8xfp4) or both be arrays (bf16xbf16)")
    if isinstance(l1_weights, tuple):
        for arg, pair in (("l1_weights", l1_weights), ("l2_weights", l2_weights)):
            if len(pair) != 2:
                raise InvalidArgumentError(f"transform_weights_for_mega_moe: argument '{arg}' must be a (data, sf) "
                                           f"pair, got {len(pair)} items")
        return tuple(_contiguous(t) for t in l1_weights), tuple(_contiguous(t) for t in l2_weights)
    return _contiguous(l1_weights), _contiguous(l2_weights)


def _pair(fn: str, arg: str, value):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidArgumentError(f"{fn}: argument '{arg}' must be a (data, sf) pair")
    return to_ref(value[0], fn, f"{arg}[0]"), to_ref(value[1], fn, f"{arg}[1]")


def _recipe3(fn: str, recipe):
    if not isinstance(recipe, (tuple, list)) or len(recipe) != 3 or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in recipe):
        raise InvalidArgumentError(f"{fn}: argument 'recipe' must be a tuple of 3 ints, got {recipe!r}")
    return [int(v) for v in recipe]


def _clamp(fn: str, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: argument 'activation_clamp' must be a float or None, got {type(value).__name__}")
    return float(value)


def fp8_fp4_mega_moe(y, l1_weights, l2_weights, sym_buffer: SymmBuffer, cumulative_local_expert_recv_stats=None,
                     recipe=(1, 1, 32), activation: str = "swiglu", activation_clamp=None,
                     fast_math: bool = True) -> None:
    """The fused MoE layer with FP8 activations and FP4 weights: y [n, hidden] bfloat16 receives, for
    each of this rank's n tokens, the sum over its top-k slots of weight * expert(x). Collective over
    the buffer's group. ``fast_math`` is accepted; the CPU always computes exp and division exactly."""
    fn = "fp8_fp4_mega_moe"
    native = sym_buffer.native(fn) if isinstance(sym_buffer, SymmBuffer) else _bad_buffer(fn, sym_buffer)
    l1, l1_sf = _pair(fn, "l1_weights", l1_weights)
    l2, l2_sf = _pair(fn, "l2_weights", l2_weights)
    _C.fp8_fp4_mega_moe(to_ref(y, fn, "y", writable=True), l1, l1_sf, l2, l2_sf,
                        optional_ref(cumulative_local_expert_recv_stats, fn, "cumulative_local_expert_recv_stats",
                                     writable=True),
                        native, _recipe3(fn, recipe), str(activation), _clamp(fn, activation_clamp), bool(fast_math))


def bf16_mega_moe(y, l1_weights, l2_weights, sym_buffer: SymmBuffer, cumulative_local_expert_recv_stats=None,
                  activation: str = "swiglu", activation_clamp=None, fast_math: bool = True) -> None:
    """The fused MoE layer with bfloat16 activations and weights (see fp8_fp4_mega_moe)."""
    fn = "bf16_mega_moe"
    native = sym_buffer.native(fn) if isinstance(sym_buffer, SymmBuffer) else _bad_buffer(fn, sym_buffer)
    _C.bf16_mega_moe(to_ref(y, fn, "y", writable=True), to_ref(l1_weights, fn, "l1_weights"),
                     to_ref(l2_weights, fn, "l2_weights"),
                     optional_ref(cumulative_local_expert_recv_stats, fn, "cumulative_local_expert_recv_stats",
                                  writable=True),
                     native, str(activation), _clamp(fn, activation_clamp), bool(fast_math))


def _bad_buffer(fn: str, value):
    raise TypeError(f"{fn}: argument 'sym_buffer' must be a SymmBuffer (get_symm_buffer_for_mega_moe), "
                    f"got {type(value).__name__}")
