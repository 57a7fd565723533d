"""DeepEP's legacy ``Buffer`` (v1) and ``Config`` on CPU ranks (docs/ep.md): the
dispatch layout, normal dispatch/combine and the low-latency (decode) pair.

Handles are tuples as in DeepEP. A normal dispatch's handle is (rank_prefix_matrix, None, None, None,
is_token_in_rank, None): DeepEP's rank prefix matrix ([R, R] int32, entry [i][j] the tokens ranks 0..i
send to rank j) and the caller's is_token_in_rank; the channel matrices, source indices and send heads
of DeepEP's GPU kernels do not exist here (None). The low-latency handle is DeepEP's (src_info,
layout_range, num_max_dispatch_tokens_per_rank, hidden, num_experts). Outputs are the caller's kind of
array: torch CPU tensors in, torch tensors out (views of tessera's memory), numpy in, numpy out. Low-latency outputs live in two buffers owned by the Buffer that alternate between calls,
as in DeepEP. Rank masking (enable_shrink and the mask-buffer methods), LogFMT combine and the
per-rank wait-cost statistics are not implemented and say so.
"""
import numpy as np

from .. import _C
from .._arrays import like, optional_ref, to_ref
from .._errors import ArgumentTypeError, NotImplementedInTessera
from . import _group
from ._event import EventHandle, EventOverlap, overlap
from ._native import output, received_x, split_bias, split_x


class Config:
    """DeepEP's performance config (SMs and chunk sizes). Accepted and kept; the CPU transport has no
    chunking knobs."""

    def __init__(self, num_sms: int = 20, num_max_nvl_chunked_send_tokens: int = 6,
                 num_max_nvl_chunked_recv_tokens: int = 256, num_max_rdma_chunked_send_tokens: int = 6,
                 num_max_rdma_chunked_recv_tokens: int = 256):
        self.num_sms = num_sms
        self.num_max_nvl_chunked_send_tokens = num_max_nvl_chunked_send_tokens
        self.num_max_nvl_chunked_recv_tokens = num_max_nvl_chunked_recv_tokens
        self.num_max_rdma_chunked_send_tokens = num_max_rdma_chunked_send_tokens
        self.num_max_rdma_chunked_recv_tokens = num_max_rdma_chunked_recv_tokens

    def get_nvl_buffer_size_hint(self, hidden_bytes: int, num_ranks: int) -> int:
        """Bytes of the receive chunks this config describes (per channel, i.e. two SMs, and rank:
        num_max_nvl_chunked_recv_tokens tokens of hidden_bytes plus room for 128 top-k entries and
        128 scales each), a multiple of 128. tessera's Buffer sizes its slots by tokens, not chunks:
        the figure only keeps code that sizes num_nvl_bytes from it working (it is generous)."""
        per_token = int(hidden_bytes) + _NUM_MAX_TOPK * (8 + 4) + _NUM_MAX_SCALES * 4 + 16
        total = (self.num_sms // 2) * int(num_ranks) * self.num_max_nvl_chunked_recv_tokens * per_token
        return (total + 127) // 128 * 128

    def get_rdma_buffer_size_hint(self, hidden_bytes: int, num_ranks: int) -> int:
        """0: tessera's Buffer keeps every receive region in num_nvl_bytes (ranks on other hosts are
        reached over MPI, which needs no registered buffer)."""
        return 0


# Room per token that Config.get_nvl_buffer_size_hint counts for top-k entries and scales.
_NUM_MAX_TOPK = 128
_NUM_MAX_SCALES = 128


class DispatchHandle(tuple):
    """A normal dispatch's handle: (rank_prefix_matrix, None, None, None, is_token_in_rank, None) as
    DeepEP's tuple, plus the native handle that cached dispatch and combine use."""

    def __new__(cls, native, is_token_in_rank, reference):
        num_ranks = int(round(len(native.rank_prefix_matrix) ** 0.5))
        prefix = np.asarray(native.rank_prefix_matrix, dtype=np.int32).reshape(num_ranks, num_ranks)
        self = super().__new__(cls, (like(prefix, reference), None, None, None, is_token_in_rank, None))
        self.native = native
        return self


def _native_handle(handle, fn):
    if isinstance(handle, DispatchHandle):
        return handle.native
    if isinstance(handle, _C.EpLegacyHandle):
        return handle
    raise ArgumentTypeError(f"{fn}: argument 'handle' must be the handle Buffer.dispatch returned, "
                    f"got {type(handle).__name__}")


class LowLatencyHandle(tuple):
    """(src_info, layout_range, num_max_dispatch_tokens_per_rank, hidden, num_experts), plus the native
    handle low_latency_combine needs."""

    def __new__(cls, native, reference):
        self = super().__new__(cls, (output(native.src_info, reference), output(native.layout_range, reference),
                                     native.num_max_dispatch_tokens_per_rank, native.hidden, native.num_experts))
        self.native = native
        return self


def _low_latency_finish(pending, async_finish: bool, return_recv_hook: bool):
    """(event, hook) of a low-latency call, as DeepEP returns them: with return_recv_hook the caller
    finishes the receive by calling the hook; otherwise async_finish hands back the pending event, or
    the call finishes before it returns."""
    hook = (lambda: pending.current_stream_wait()) if return_recv_hook else (lambda: None)
    ev = EventOverlap(None)
    if async_finish and not return_recv_hook:
        ev = pending
    elif not return_recv_hook:
        pending.current_stream_wait()
    return ev, hook


def _not_implemented(what: str):
    raise NotImplementedInTessera(f"tessera.deep_ep.Buffer: {what} is not implemented on CPUs (see docs/ep.md)")


class Buffer:
    """Expert-parallel communication buffer (DeepEP v1) between the ranks of ``group`` (or ``comm``,
    an mpi4py communicator). ``num_cpu_timeout_secs`` is a tessera extension: the bound on every wait."""

    num_sms: int = 20

    def __init__(self, group=None, num_nvl_bytes: int = 0, num_rdma_bytes: int = 0, low_latency_mode: bool = False,
                 num_qps_per_rank: int = 24, allow_nvlink_for_low_latency_mode: bool = True,
                 allow_mnnvl: bool = False, explicitly_destroy: bool = False, enable_shrink: bool = False,
                 comm=None, num_cpu_timeout_secs: float = 300):
        self._group = _group.resolve(group, comm, fn="Buffer")
        self.group = group if group is not None else comm
        self.rank = self._group.rank()
        self.group_size = self._group.size()
        self.num_nvl_bytes = num_nvl_bytes
        self.num_rdma_bytes = num_rdma_bytes
        self.low_latency_mode = low_latency_mode
        self.explicitly_destroy = explicitly_destroy
        self.enable_shrink = enable_shrink
        self.runtime = _C.EpBuffer(self._group._native, int(num_nvl_bytes), int(num_rdma_bytes), bool(low_latency_mode),
                                   int(num_qps_per_rank), bool(explicitly_destroy), bool(enable_shrink),
                                   float(num_cpu_timeout_secs))
        self._combine_buffer = None

    def destroy(self) -> None:
        if not self.explicitly_destroy:
            raise RuntimeError("Buffer.destroy: `explicitly_destroy` flag must be set")
        if self.runtime is not None:
            self.runtime.destroy()
            self.runtime = None

    def _rt(self, fn):
        if self.runtime is None:
            raise RuntimeError(f"Buffer.{fn}: the buffer was destroyed")
        return self.runtime

    @staticmethod
    def is_sm90_compiled() -> bool:
        """True: DeepEP gates its FP8 paths on this, and every FP8 path (FP8 normal dispatch, FP8
        low-latency dispatch) exists on the CPU. No SM90 code is involved."""
        return True

    @staticmethod
    def set_num_sms(new_num_sms: int) -> None:
        if new_num_sms % 2 != 0:
            raise ValueError("Buffer.set_num_sms: the SM count must be even")
        Buffer.num_sms = new_num_sms

    @staticmethod
    def capture() -> EventOverlap:
        return EventOverlap(EventHandle())

    @staticmethod
    def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int,
                                       num_experts: int) -> int:
        return _C.EpBuffer.get_low_latency_rdma_size_hint(int(num_max_dispatch_tokens_per_rank), int(hidden),
                                                          int(num_ranks), int(num_experts))

    def get_comm_stream(self):
        """CPUs have no streams: None."""
        return None

    def get_local_buffer_tensor(self, *args, **kwargs):
        _not_implemented("get_local_buffer_tensor (raw access to the receive region)")

    @staticmethod
    def get_dispatch_config(num_ranks: int) -> Config:
        return Config(Buffer.num_sms)

    @staticmethod
    def get_combine_config(num_ranks: int) -> Config:
        return Config(Buffer.num_sms)

    def get_dispatch_layout(self, topk_idx, num_experts: int, previous_event=None, async_finish: bool = False,
                            allocate_on_comm_stream: bool = False):
        """(num_tokens_per_rank, num_tokens_per_rdma_rank or None, num_tokens_per_expert,
        is_token_in_rank, event) for this rank's tokens."""
        if previous_event is not None:
            previous_event.current_stream_wait()
        per_rank, per_node, per_expert, in_rank = self._rt("get_dispatch_layout").get_dispatch_layout(
            to_ref(topk_idx, "Buffer.get_dispatch_layout", "topk_idx"), int(num_experts))
        return (output(per_rank, topk_idx), output(per_node, topk_idx), output(per_expert, topk_idx),
                output(in_rank, topk_idx), EventOverlap(None))

    def dispatch(self, x, handle=None, num_tokens_per_rank=None, num_tokens_per_rdma_rank=None,
                 is_token_in_rank=None, num_tokens_per_expert=None, topk_idx=None, topk_weights=None,
                 expert_alignment: int = 1, num_worst_tokens: int = 0, config=None, previous_event=None,
                 async_finish: bool = False, allocate_on_comm_stream: bool = False):
        """Returns (recv_x, recv_topk_idx, recv_topk_weights, num_recv_tokens_per_expert_list, handle,
        event); with a cached handle only recv_x is returned (the rest None)."""
        fn = "Buffer.dispatch"
        if previous_event is not None:
            previous_event.current_stream_wait()
        data, sf = split_x(fn, x)
        native = None if handle is None else _native_handle(handle, fn)
        recv_x, recv_sf, recv_idx, recv_w, counts, native_handle, event = self._rt("dispatch").dispatch(
            to_ref(data, fn, "x"), optional_ref(sf, fn, "x.sf"), native,
            optional_ref(num_tokens_per_rank, fn, "num_tokens_per_rank"),
            optional_ref(num_tokens_per_rdma_rank, fn, "num_tokens_per_rdma_rank"),
            optional_ref(is_token_in_rank, fn, "is_token_in_rank"),
            optional_ref(num_tokens_per_expert, fn, "num_tokens_per_expert"), optional_ref(topk_idx, fn, "topk_idx"),
            optional_ref(topk_weights, fn, "topk_weights"), int(expert_alignment), int(num_worst_tokens),
            bool(async_finish))
        keep = (data, sf, topk_idx, topk_weights, is_token_in_rank)
        recv = received_x(recv_x, recv_sf, data, sf)
        ev = overlap(event, async_finish, keep)
        if handle is not None:
            return recv, None, None, None, None, ev
        return (recv, output(recv_idx, data), output(recv_w, data), list(counts),
                DispatchHandle(native_handle, is_token_in_rank, data), ev)

    internode_dispatch = dispatch

    def combine(self, x, handle, topk_weights=None, bias=None, config=None, previous_event=None,
                async_finish: bool = False, allocate_on_comm_stream: bool = False):
        """Returns (combined_x, combined_topk_weights or None, event): an unweighted fp32 sum, bias first,
        then source ranks ascending."""
        fn = "Buffer.combine"
        if previous_event is not None:
            previous_event.current_stream_wait()
        bias0, bias1 = split_bias(bias)
        combined, combined_w, event = self._rt("combine").combine(
            to_ref(x, fn, "x"), _native_handle(handle, fn), optional_ref(topk_weights, fn, "topk_weights"),
            optional_ref(bias0, fn, "bias[0]"), optional_ref(bias1, fn, "bias[1]"), bool(async_finish))
        return output(combined, x), output(combined_w, x), overlap(event, async_finish, (x, topk_weights, bias0, bias1))

    internode_combine = combine

    # ---- low latency ----
    def clean_low_latency_buffer(self, num_max_dispatch_tokens_per_rank: int, hidden: int, num_experts: int) -> None:
        """Nothing to clean: the CPU transport keeps no state between calls that needs zeroing."""
        return None

    def low_latency_dispatch(self, x, topk_idx, num_max_dispatch_tokens_per_rank: int, num_experts: int,
                             cumulative_local_expert_recv_stats=None, dispatch_wait_recv_cost_stats=None,
                             use_fp8: bool = True, round_scale: bool = False, use_ue8m0: bool = False,
                             async_finish: bool = False, return_recv_hook: bool = False):
        """Returns (recv_x, recv_count, handle, event, hook): recv_x is [E_local, R * max, H] (a pair with
        its scales for FP8); only the first recv_count[e] rows of expert e are valid."""
        fn = "Buffer.low_latency_dispatch"
        if dispatch_wait_recv_cost_stats is not None:
            _not_implemented("low_latency_dispatch(dispatch_wait_recv_cost_stats=...)")
        recv_x, scales, count, native_handle, event = self._rt("low_latency_dispatch").low_latency_dispatch(
            to_ref(x, fn, "x"), to_ref(topk_idx, fn, "topk_idx"), int(num_max_dispatch_tokens_per_rank),
            int(num_experts),
            optional_ref(cumulative_local_expert_recv_stats, fn, "cumulative_local_expert_recv_stats", writable=True),
            bool(use_fp8), bool(round_scale), bool(use_ue8m0), bool(async_finish), bool(return_recv_hook))
        recv = output(recv_x, x)
        if scales is not None:
            recv = (recv, output(scales, x))
        keep = (x, topk_idx, cumulative_local_expert_recv_stats)
        pending = overlap(event, True, keep)
        handle = _LazyLowLatencyHandle(native_handle, x, pending)
        ev, hook = _low_latency_finish(pending, async_finish, return_recv_hook)
        return recv, output(count, x), handle, ev, hook

    def low_latency_combine(self, x, topk_idx, topk_weights, handle, use_logfmt: bool = False,
                            zero_copy: bool = False, async_finish: bool = False, return_recv_hook: bool = False,
                            out=None, combine_wait_recv_cost_stats=None):
        """Returns (combined_x [T, H] bf16, event, hook): sum over k of topk_weights[t, k] * y_k in fp32."""
        fn = "Buffer.low_latency_combine"
        if use_logfmt:
            _not_implemented("low_latency_combine(use_logfmt=True)")
        if combine_wait_recv_cost_stats is not None:
            _not_implemented("low_latency_combine(combine_wait_recv_cost_stats=...)")
        combined, event = self._rt("low_latency_combine").low_latency_combine(
            to_ref(x, fn, "x"), to_ref(topk_idx, fn, "topk_idx"), to_ref(topk_weights, fn, "topk_weights"),
            _native_ll(handle, fn), optional_ref(out, fn, "out", writable=True), bool(async_finish),
            bool(return_recv_hook))
        result = out if out is not None else output(combined, x)
        pending = overlap(event, True, (x, topk_idx, topk_weights, out))
        ev, hook = _low_latency_finish(pending, async_finish, return_recv_hook)
        return result, ev, hook

    def get_next_low_latency_combine_buffer(self, handle):
        """A bf16 [E_local, R * max, H] array to fill with expert outputs and pass as ``x`` (zero_copy);
        a torch tensor (sharing the buffer's memory) when the dispatch was given torch tensors."""
        src_info, _, num_max, hidden, num_experts = handle
        shape = (num_experts // self.group_size, self.group_size * num_max, hidden)
        if self._combine_buffer is None or self._combine_buffer.shape != shape:
            import ml_dtypes
            self._combine_buffer = np.zeros(shape, dtype=ml_dtypes.bfloat16)
        return like(self._combine_buffer, src_info)

    def low_latency_update_mask_buffer(self, rank_to_mask: int, mask: bool = False):
        _not_implemented("masking ranks (low_latency_update_mask_buffer)")

    def low_latency_query_mask_buffer(self, mask_status):
        _not_implemented("masking ranks (low_latency_query_mask_buffer)")

    def low_latency_clean_mask_buffer(self):
        _not_implemented("masking ranks (low_latency_clean_mask_buffer)")


class _LazyLowLatencyHandle(LowLatencyHandle):
    """A low-latency handle whose arrays are complete once the dispatch was received (hook/event)."""

    def __new__(cls, native, reference, pending):
        self = LowLatencyHandle.__new__(cls, native, reference)
        self.pending = pending
        return self


def _native_ll(handle, fn):
    if not isinstance(handle, LowLatencyHandle):
        raise ArgumentTypeError(f"{fn}: argument 'handle' must be the handle low_latency_dispatch returned")
    handle.pending.current_stream_wait()
    return handle.native
