"""DeepEP's ``ElasticBuffer`` (v2) on CPU ranks: the same class, methods, argument names and defaults
(see docs/ep.md).

GPU-only knobs are accepted and have no effect: num_sms is the number of worker threads (0: automatic),
num_qps, sl_idx, num_allocated_qps, num_gpu_timeout_secs, allocate_on_comm_stream and
prefer_overlap_with_compute change nothing. Arrays are numpy arrays (ml_dtypes for bfloat16 / float8)
or torch CPU tensors; outputs follow the input's kind (torch outputs are views of tessera's memory).
``do_cpu_sync`` takes any truthy value; a cached dispatch returns the first dispatch's recv_topk_idx.
Deviations: docs/compat.md.
"""
import contextlib
import math

import numpy as np

from .. import _C
from .._arrays import is_torch_tensor, like, optional_ref, to_ref
from . import _dtypes, _group
from ._event import EventHandle, overlap
from ._native import output, received_x, split_bias, split_x
from .._errors import ArgumentTypeError


# DeepEP's buffer sizes are multiples of 2 MiB.
_BUFFER_ALIGNMENT = 2 << 20


def _align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


class EPHandle:
    """What ``ElasticBuffer.dispatch`` returns for ``combine`` and cached dispatch, with DeepEP's
    attributes. Arrays are the dispatch input's kind (torch tensors for torch input), made once per
    handle and then the same objects on every access. ``topk_idx`` is a copy of the caller's
    topk_idx, or with ``do_handle_copy=False`` the caller's object itself (as in DeepEP; tessera's
    cached dispatch and combine use the routing recorded at dispatch, so later changes to that object
    do not reroute them). Without CPU sync the arrays are complete once the event was waited on."""

    _ARRAYS = {  # name: (dtype, columns: None (1-D) or a function of num_topk)
        "psum_num_recv_tokens_per_scaleup_rank": (np.int32, None),
        "psum_num_recv_tokens_per_expert": (np.int32, None),
        "num_unaligned_recv_tokens_per_expert": (np.int32, None),
        "recv_src_metadata": (np.int32, lambda k: k + 2),
        "dst_buffer_slot_idx": (np.int32, lambda k: k),
    }
    # Hybrid-mode forwarding state lives inside the native handle.
    token_metadata_at_forward = None
    channel_linked_list = None

    def __init__(self, native, owner, topk_idx=None, reference=None, recv_topk_idx=None, event=None):
        self._native = native
        self._event = event  # the dispatch's native event while it may be pending
        self._owner = owner
        self._reference = reference
        self._topk_idx = topk_idx
        self._recv_topk_idx = recv_topk_idx  # what cached dispatches return as recv_topk_idx
        self._cache = {}
        self.cached_recv_src_metadata_before_sort = None

    def _array(self, name):
        if name not in self._cache:
            if self._event is not None:
                # The arrays are copied once, so only after the dispatch completed (waiting twice is
                # harmless: a finished event returns at once).
                if not self._event.done():
                    self._event.wait()
                self._event = None
            dtype, cols = self._ARRAYS[name]
            flat = np.frombuffer(getattr(self._native, name), dtype=dtype).copy()
            array = flat if cols is None else flat.reshape(-1, cols(self._native.num_topk))
            self._cache[name] = like(array, self._reference)
        return self._cache[name]

    def __getattr__(self, name):
        if name in EPHandle._ARRAYS:
            return self._array(name)
        raise AttributeError(f"'EPHandle' object has no attribute {name!r}")

    @property
    def topk_idx(self):
        if self._topk_idx is None:
            flat = np.frombuffer(self._native.topk_idx, dtype=np.int64).copy()
            self._topk_idx = like(flat.reshape(-1, self._native.num_topk), self._reference)
        return self._topk_idx

    do_expand = property(lambda self: self._native.do_expand)
    num_experts = property(lambda self: self._native.num_experts)
    expert_alignment = property(lambda self: self._native.expert_alignment)
    num_max_tokens_per_rank = property(lambda self: self._native.num_max_tokens_per_rank)
    num_sms = property(lambda self: self._native.num_sms)
    num_recv_tokens = property(lambda self: self._native.num_recv_tokens)
    num_expanded_tokens = property(lambda self: self._native.num_expanded_tokens)
    num_recv_tokens_per_expert_list = property(lambda self: list(self._native.num_recv_tokens_per_expert_list))

    def deterministic_sort(self, do_cpu_sync, is_cached_dispatch, recv_x, recv_sf, recv_topk_idx,
                           recv_topk_weights, channel_linked_list=None) -> None:
        """DeepEP's epilogue for deterministic=True: puts the received rows of a non-expanded dispatch
        in (source rank, source token) order, in place. tessera's dispatch already writes them in that
        order, so this is a stable no-op on its outputs; it exists for code that calls it directly.
        Expanded layouts are left as they are (as DeepEP leaves their rows)."""
        if self.do_expand:
            return
        from ._sort import sort_received
        sort_received(self, bool(do_cpu_sync), bool(is_cached_dispatch),
                      (recv_x, recv_sf, recv_topk_idx, recv_topk_weights))


class ElasticBuffer:
    """Expert-parallel dispatch/combine buffer (DeepEP v2) between the ranks of ``group``."""

    def __init__(self, group, num_bytes=None, num_cpu_bytes: int = 0, num_max_tokens_per_rank: int = 0,
                 hidden: int = 0, num_topk: int = 0, use_fp8_dispatch: bool = False, deterministic: bool = False,
                 allow_hybrid_mode: bool = True, allow_multiple_reduction: bool = True,
                 prefer_overlap_with_compute: bool = True, sl_idx: int = 3, num_allocated_qps: int = 0,
                 num_cpu_timeout_secs: int = 300, num_gpu_timeout_secs: int = 100, explicitly_destroy: bool = False):
        self.group = group
        self._group = _group.resolve(group, fn="ElasticBuffer")
        self.allow_hybrid_mode = allow_hybrid_mode
        self.allow_multiple_reduction = allow_multiple_reduction
        self.prefer_overlap_with_compute = prefer_overlap_with_compute
        self.deterministic = deterministic
        self.explicitly_destroy = explicitly_destroy
        self.num_allocated_qps = num_allocated_qps
        self.num_max_tokens_per_rank = num_max_tokens_per_rank
        self.runtime = _C.EpElasticBuffer(self._group._native, None if num_bytes is None else int(num_bytes),
                                          int(num_cpu_bytes), int(num_max_tokens_per_rank), int(hidden), int(num_topk),
                                          bool(use_fp8_dispatch), bool(deterministic), bool(allow_hybrid_mode),
                                          bool(allow_multiple_reduction), bool(prefer_overlap_with_compute),
                                          float(num_cpu_timeout_secs), bool(explicitly_destroy))
        self.rank_idx = self.runtime.rank_idx
        self.num_ranks = self.runtime.num_ranks
        self.num_bytes = self.runtime.num_bytes
        self.num_scaleout_ranks = self.runtime.num_scaleout_ranks
        self.num_scaleup_ranks = self.runtime.num_scaleup_ranks
        self.scaleout_rank_idx = self.runtime.scaleout_rank_idx
        self.scaleup_rank_idx = self.runtime.scaleup_rank_idx
        self.num_rdma_ranks, self.num_nvlink_ranks = self.num_scaleout_ranks, self.num_scaleup_ranks
        self.hybrid_mode = self.runtime.hybrid_mode

    # ---- lifetime and sizing ----
    def destroy(self) -> None:
        """Releases the shared memory now (requires explicitly_destroy=True)."""
        if not self.explicitly_destroy:
            raise RuntimeError("ElasticBuffer.destroy: the buffer was created with explicitly_destroy=False")
        if self.runtime is not None:
            self.runtime.destroy()
            self.runtime = None

    @staticmethod
    def get_buffer_size_hint(group, num_max_tokens_per_rank: int, hidden: int, num_topk: int = 0,
                             use_fp8_dispatch: bool = False, allow_hybrid_mode: bool = True,
                             allow_multiple_reduction: bool = True) -> int:
        """Receive-region bytes per rank for these MoE settings (a multiple of 2 MiB)."""
        g = _group.resolve(group, fn="ElasticBuffer.get_buffer_size_hint")
        return _C.EpElasticBuffer.get_buffer_size_hint(g._native, int(num_max_tokens_per_rank), int(hidden),
                                                       int(num_topk), bool(use_fp8_dispatch), bool(allow_hybrid_mode),
                                                       bool(allow_multiple_reduction))

    def barrier(self, use_comm_stream: bool = True, with_cpu_sync: bool = False, sequential: bool = True) -> None:
        self._rt("barrier").barrier()

    @staticmethod
    def capture() -> EventHandle:
        return EventHandle()

    def get_comm_stream(self):
        """CPUs have no streams: None."""
        return None

    def get_physical_domain_size(self):
        return self.num_scaleout_ranks, self.num_scaleup_ranks

    def get_logical_domain_size(self):
        return self.num_scaleout_ranks, self.num_scaleup_ranks

    def get_theoretical_num_sms(self, num_experts: int, num_topk: int, num_scaleout_topk: int = 0, rdma_gbs: float = 0,
                                nvlink_gbs: float = 0, sm_read_gbs: float = 200, sm_write_gbs: float = 50) -> int:
        """Worker threads a dispatch/combine uses on this rank (DeepEP: SMs)."""
        return self._rt("get_theoretical_num_sms").get_theoretical_num_sms(int(num_experts), int(num_topk))

    def get_theoretical_num_qps(self, num_sms: int) -> int:
        return 0

    def _rt(self, fn):
        if self.runtime is None:
            raise RuntimeError(f"ElasticBuffer.{fn}: the buffer was destroyed")
        return self.runtime

    # ---- dispatch / combine ----
    def dispatch(self, x, topk_idx=None, topk_weights=None, cumulative_local_expert_recv_stats=None,
                 num_experts=None, num_max_tokens_per_rank=None, expert_alignment=None, num_sms: int = 0,
                 num_qps: int = 0, previous_event=None, previous_event_before_epilogue=None,
                 async_with_compute_stream: bool = False, allocate_on_comm_stream: bool = False, handle=None,
                 do_handle_copy: bool = True, do_cpu_sync=None, do_expand: bool = False,
                 do_zero_padding: bool = False, use_tma_aligned_col_major_sf: bool = False):
        """Sends every token to the ranks holding its experts. Returns (recv_x, recv_topk_idx,
        recv_topk_weights, handle, event); recv_x is a (data, scale_factors) pair for FP8 input."""
        fn = "ElasticBuffer.dispatch"
        rt = self._rt("dispatch")
        for event in (previous_event, previous_event_before_epilogue):
            if event is not None:
                event.current_stream_wait()
        data, sf = split_x(fn, x)
        if handle is not None and not isinstance(handle, EPHandle):
            raise ArgumentTypeError(f"{fn}: argument 'handle' must be an EPHandle from dispatch, got {type(handle).__name__}")
        recv_x, recv_sf, recv_idx, recv_w, native_handle, event = rt.dispatch(
            to_ref(data, fn, "x"), optional_ref(sf, fn, "x.sf"), optional_ref(topk_idx, fn, "topk_idx"),
            optional_ref(topk_weights, fn, "topk_weights"),
            optional_ref(cumulative_local_expert_recv_stats, fn, "cumulative_local_expert_recv_stats", writable=True),
            int(num_experts or 0), int(num_max_tokens_per_rank or 0), int(expert_alignment or 0),
            None if handle is None else handle._native, bool(do_handle_copy),
            None if do_cpu_sync is None else bool(do_cpu_sync), bool(do_expand),
            bool(do_zero_padding), bool(use_tma_aligned_col_major_sf), bool(async_with_compute_stream), int(num_sms))
        keep = (data, sf, topk_idx, topk_weights, cumulative_local_expert_recv_stats)
        recv = received_x(recv_x, recv_sf, data, sf)
        recv_topk_idx = output(recv_idx, data)
        if handle is not None:
            # DeepEP's cached dispatch returns recv_topk_idx again; the routing is the handle's, so
            # these are the first dispatch's rows (a copy, like DeepEP's fresh output).
            out_handle = handle
            if recv_topk_idx is None and handle._recv_topk_idx is not None:
                first = handle._recv_topk_idx
                recv_topk_idx = first.clone() if is_torch_tensor(first) else first.copy()
        else:
            owned_idx = None
            if topk_idx is not None:
                owned_idx = topk_idx if not do_handle_copy else (
                    topk_idx.clone() if is_torch_tensor(topk_idx) else np.array(topk_idx, copy=True))
            out_handle = EPHandle(native_handle, self, owned_idx, data, recv_topk_idx, event)
        return (recv, recv_topk_idx, output(recv_w, data), out_handle,
                overlap(event, async_with_compute_stream, keep))

    def combine(self, x, handle, topk_weights=None, bias=None, num_sms: int = 0, num_qps: int = 0,
                previous_event=None, previous_event_before_epilogue=None, async_with_compute_stream: bool = False,
                allocate_on_comm_stream: bool = False):
        """Reduces every token's expert outputs back on its source rank. Returns (combined_x,
        combined_topk_weights or None, event)."""
        fn = "ElasticBuffer.combine"
        rt = self._rt("combine")
        for event in (previous_event, previous_event_before_epilogue):
            if event is not None:
                event.current_stream_wait()
        if not isinstance(handle, EPHandle):
            raise ArgumentTypeError(f"{fn}: argument 'handle' must be an EPHandle from dispatch, got {type(handle).__name__}")
        bias0, bias1 = split_bias(bias)
        combined, combined_w, event = rt.combine(
            to_ref(x, fn, "x"), handle._native, optional_ref(topk_weights, fn, "topk_weights"),
            optional_ref(bias0, fn, "bias[0]"), optional_ref(bias1, fn, "bias[1]"), bool(async_with_compute_stream),
            int(num_sms))
        keep = (x, topk_weights, bias0, bias1)
        return output(combined, x), output(combined_w, x), overlap(event, async_with_compute_stream, keep)

    def get_combine_input_buffer(self, handle, hidden=None, like=None):
        """tessera extension: a bf16 [num_recv_tokens, hidden] array for the expert outputs of
        ``handle``'s dispatch, to fill and pass to ``combine`` as ``x``. For the non-expanded layout on
        one node it lives in the buffer's shared memory, so the source ranks read the rows where they
        are instead of receiving a copy (about 1.7x less memory traffic; ``recv_x`` of a bf16 dispatch
        is read in place the same way). Keep it unchanged until combine's event completed. ``like``: a
        torch tensor to return a torch view instead of a NumPy array."""
        fn = "ElasticBuffer.get_combine_input_buffer"
        if not isinstance(handle, EPHandle):
            raise ArgumentTypeError(f"{fn}: argument 'handle' must be an EPHandle from dispatch, got {type(handle).__name__}")
        tensor = self._rt("get_combine_input_buffer").get_combine_input(handle._native, int(hidden or 0))
        return output(tensor, like)

    # ---- experimental (DeepEP v2): pipeline-parallel send/recv to ring neighbours ----
    @staticmethod
    def get_pp_buffer_size_hint(num_max_tensor_bytes: int, num_max_inflight_tensors: int) -> int:
        # DeepEP's figure is a multiple of 2 MiB (so it is a valid num_bytes); tessera's rings need less.
        return _align(int(_C.EpElasticBuffer.get_pp_buffer_size_hint(int(num_max_tensor_bytes),
                                                                      int(num_max_inflight_tensors))),
                      _BUFFER_ALIGNMENT)

    def pp_set_config(self, num_max_tensor_bytes: int, num_max_inflight_tensors: int) -> None:
        """Collective: sets up FIFO rings to the previous and next rank (flushes earlier operations)."""
        self._rt("pp_set_config").pp_set_config(int(num_max_tensor_bytes), int(num_max_inflight_tensors))

    def pp_send(self, t, dst_rank_idx: int, num_sms: int = 0) -> None:
        """Sends contiguous ``t`` to the previous or next rank; returns once ``t`` may be reused (blocks
        while num_max_inflight_tensors earlier tensors to that rank are unconsumed)."""
        self._rt("pp_send").pp_send(to_ref(t, "ElasticBuffer.pp_send", "t"), int(dst_rank_idx))

    def pp_recv(self, t, src_rank_idx: int, num_sms: int = 0) -> None:
        """Receives the next tensor from the previous or next rank into contiguous ``t`` (same byte size)."""
        self._rt("pp_recv").pp_recv(to_ref(t, "ElasticBuffer.pp_recv", "t", writable=True), int(src_rank_idx))

    # ---- experimental (DeepEP v2): all-gather sessions ----
    @staticmethod
    def get_agrs_buffer_size_hint(group, num_max_session_bytes: int) -> int:
        return int(num_max_session_bytes)

    def agrs_set_config(self, num_max_session_bytes: int, num_max_all_gathers_per_session: int) -> None:
        """Collective: room for ``num_max_session_bytes`` of gathered tensors (num_ranks x the inputs)
        and ``num_max_all_gathers_per_session`` all_gather calls per session."""
        self._rt("agrs_set_config").agrs_set_config(int(num_max_session_bytes), int(num_max_all_gathers_per_session))

    def create_agrs_session(self) -> None:
        self._rt("create_agrs_session").create_agrs_session()

    def destroy_agrs_session(self) -> None:
        """Ends the session: its gathered arrays may be overwritten by the next session."""
        self._rt("destroy_agrs_session").destroy_agrs_session()

    @contextlib.contextmanager
    def agrs_new_session(self, enabled: bool = True):
        if not enabled:
            yield
            return
        self.create_agrs_session()
        try:
            yield
        finally:
            self.destroy_agrs_session()

    def agrs_get_inplace_tensor(self, shapes, dtype):
        """This rank's slot(s) of the next all_gather: fill them and pass them to all_gather to skip
        this rank's own copy. ``shapes``: one shape or a sequence of shapes (batched); ``dtype``: a
        numpy dtype (or ml_dtypes type) or a torch dtype. Returns one array or a tuple."""
        batched = len(shapes) > 0 and isinstance(shapes[0], (tuple, list))
        shape_list = [tuple(int(d) for d in sh) for sh in (shapes if batched else [shapes])]
        torch_dtype = None if isinstance(dtype, (type, np.dtype, str)) else dtype
        itemsize = torch_dtype.itemsize if torch_dtype is not None else np.dtype(dtype).itemsize
        slots = self._rt("agrs_get_inplace_tensor").agrs_get_inplace_tensor(
            [math.prod(sh) * itemsize for sh in shape_list])
        out = []
        for tensor, sh in zip(slots, shape_list):
            raw = output(tensor, None)
            if torch_dtype is None:
                out.append(raw.view(np.dtype(dtype)).reshape(sh))
            else:
                import torch
                out.append(torch.from_numpy(raw).view(torch_dtype).view(sh))
        return tuple(out) if batched else out[0]

    def all_gather(self, t):
        """Gathers every rank's ``t`` (or each tensor of a sequence; every rank passes the same byte
        sizes, each a multiple of 32) inside an active session. Returns ``(gathered, handle)`` or
        ``(*gathered, handle)``: gathered arrays have a leading num_ranks dimension and stay valid
        until the session ends; ``handle()`` waits until every rank's data arrived."""
        fn = "ElasticBuffer.all_gather"
        batched = isinstance(t, (list, tuple))
        tensors = list(t) if batched else [t]
        gathered, event = self._rt("all_gather").all_gather([to_ref(x, fn, "t") for x in tensors])
        arrays = [output(g, x) for g, x in zip(gathered, tensors)]

        def handle():
            event.wait()

        return (*arrays, handle) if batched else (arrays[0], handle)

    # ---- experimental (DeepEP v2): Engram storage ----
    @staticmethod
    def get_engram_storage_size_hint(num_entries: int, hidden: int, num_max_tokens_per_rank: int,
                                     dtype=None) -> tuple:
        """DeepEP's pair (receive bytes, storage bytes), each a multiple of 2 MiB: entries of
        ``hidden`` values of ``dtype`` (a torch or numpy dtype; default bfloat16) padded to 32 bytes,
        for num_max_tokens_per_rank fetched rows and num_entries stored ones. tessera's engram keeps
        its own storage; the figures size a buffer the way DeepEP code does."""
        size = 2 if dtype is None else _dtypes.itemsize(dtype, "ElasticBuffer.get_engram_storage_size_hint")
        entry = _align(int(hidden) * size, 32)
        return (_align(entry * int(num_max_tokens_per_rank), _BUFFER_ALIGNMENT),
                _align(entry * int(num_entries), _BUFFER_ALIGNMENT))

    def engram_write(self, storage, sf=None) -> None:
        """Collective: this rank's ``[num_entries, hidden]`` entries (every rank the same shape and dtype;
        ``sf``: optional ``[num_entries, packs]`` 4-byte scale packs). Global entry g is entry
        ``g % num_entries`` of rank ``g // num_entries``. Between the ranks of one node only."""
        fn = "ElasticBuffer.engram_write"
        self._rt("engram_write").engram_write(to_ref(storage, fn, "storage"), optional_ref(sf, fn, "sf"))

    def engram_fetch(self, indices, num_qps: int = 0, use_tma_aligned_col_major_sf: bool = False):
        """Reads entries ``indices`` (int32 ``[T]`` or ``[T, P]``) from their owners. Returns a hook:
        ``hook()`` gives ``(data [T, P * hidden], sf [T, P * packs] or None)``. The scale factors are
        row-major whatever ``use_tma_aligned_col_major_sf`` says (the values are DeepEP's)."""
        fn = "ElasticBuffer.engram_fetch"
        data, sf = self._rt("engram_fetch").engram_fetch(to_ref(indices, fn, "indices"))
        result = (output(data, indices), output(sf, indices))

        def hook():
            return result

        return hook

    @staticmethod
    def get_agrs_num_max_session_bytes(group, shapes, dtype) -> int:
        """Bytes one AGRS session gathers: per shape (one, or a sequence of shapes) every rank's
        tensor of ``dtype`` (torch or numpy), each padded to 32 bytes, summed."""
        fn = "ElasticBuffer.get_agrs_num_max_session_bytes"
        num_ranks = _group.resolve(group, fn=fn).size()
        size = _dtypes.itemsize(dtype, fn)
        shape_list = shapes if len(shapes) > 0 and isinstance(shapes[0], (tuple, list)) else [shapes]
        return sum(_align(num_ranks * math.prod(int(d) for d in sh) * size, 32) for sh in shape_list)
