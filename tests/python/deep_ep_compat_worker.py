"""One rank of tests/python/test_deep_ep_compat.py (``mpirun -np N python deep_ep_compat_worker.py``, or
one plain process): DeepEP call-compatibility of tessera.deep_ep with torch tensors and numpy arrays.
Every rank rebuilds every rank's inputs from a seed, so expectations are exact references computed
here in numpy / float64. Prints "DEEP_EP_COMPAT OK <rank>" at the end; any failure raises."""
import sys

import ml_dtypes
import numpy as np
import torch

import tessera.deep_ep as deep_ep

BF16 = np.dtype(ml_dtypes.bfloat16)


def layout(rank, ranks, tokens=37, topk=3, experts_per_rank=4, hidden=256):
    """One rank's inputs: topk_idx (some -1), bf16 x of small integers (sums stay exact), the
    layout DeepEP's get_dispatch_layout computes, and FP8 data with its scales."""
    rng = np.random.default_rng(100 + rank)
    T, E = tokens + 5 * rank, experts_per_rank * ranks
    idx = np.stack([rng.permutation(E)[:topk] for _ in range(T)]).astype(np.int64)
    idx[rng.random((T, topk)) < 0.15] = -1
    owner = np.where(idx >= 0, idx // experts_per_rank, -1)
    in_rank = np.stack([(owner == r).any(1) for r in range(ranks)], axis=1)
    per_rank = in_rank.sum(0).astype(np.int32)
    per_expert = np.array([(idx == e).sum() for e in range(E)], dtype=np.int32)
    x = rng.integers(-8, 9, (T, hidden)).astype(np.float32)
    x8 = rng.integers(0, 0x70, (T, hidden), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    sf = (rng.random((T, hidden // 128)) + 0.5).astype(np.float32)
    return dict(T=T, E=E, idx=idx, in_rank=in_rank, per_rank=per_rank, per_expert=per_expert, x=x, x8=x8, sf=sf,
                epr=experts_per_rank, K=topk, H=hidden)


def expected_rows(all_in, me):
    """(source rank, token) of every row this rank receives, in tessera's order (source, token)."""
    return [(s, t) for s, d in enumerate(all_in) for t in range(d["T"]) if d["in_rank"][t, me]]


def as_kind(a, kind):
    if kind == "numpy":
        return a
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if a.dtype == np.dtype(ml_dtypes.float8_e4m3fn):
        return torch.from_numpy(a.view(np.uint8)).view(torch.float8_e4m3fn)
    return torch.from_numpy(a)


def to_np(a):
    if isinstance(a, np.ndarray):
        return a
    if a.dtype == torch.bfloat16:
        return a.view(torch.int16).numpy().view(BF16)
    if a.dtype == torch.float8_e4m3fn:
        return a.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    return a.numpy()


def check_kind(value, kind, what):
    want = np.ndarray if kind == "numpy" else torch.Tensor
    assert isinstance(value, want), f"{what}: {type(value).__name__}, expected {want.__name__}"


def check_legacy(group, ranks, me, kind):
    all_in = [layout(r, ranks) for r in range(ranks)]
    d = all_in[me]
    buf = deep_ep.Buffer(group, int(64e6))
    x = as_kind(d["x"].astype(BF16), kind)
    args = dict(num_tokens_per_rank=as_kind(d["per_rank"], kind), is_token_in_rank=as_kind(d["in_rank"], kind),
                num_tokens_per_expert=as_kind(d["per_expert"], kind))
    rows = expected_rows(all_in, me)
    want_x = np.stack([all_in[s]["x"][t] for s, t in rows]) if rows else np.zeros((0, d["H"]))
    # DeepEP's counts: every rank's num_tokens_per_expert summed for this rank's experts, top-k or not.
    want_counts = [int(sum(a["per_expert"][me * d["epr"] + e] for a in all_in)) for e in range(d["epr"])]
    sent = np.array([[a["per_rank"][j] for j in range(ranks)] for a in all_in])
    want_prefix = np.cumsum(sent, axis=0).astype(np.int32)
    for with_topk in (False, True):
        extra = dict(topk_idx=as_kind(d["idx"], kind), topk_weights=as_kind(np.ones((d["T"], d["K"]), np.float32), kind)) \
            if with_topk else {}
        recv_x, recv_idx, recv_w, counts, handle, _ = buf.dispatch(x, **args, **extra)
        check_kind(recv_x, kind, "Buffer.dispatch recv_x")
        # The review's data bug: without topk_idx the rows came back as zeros.
        np.testing.assert_array_equal(to_np(recv_x).astype(np.float64), want_x.astype(np.float64))
        assert counts == want_counts, f"rank {me} with_topk={with_topk}: counts {counts} != {want_counts}"
        assert isinstance(handle, tuple) and len(handle) == 6, type(handle)
        check_kind(handle[0], kind, "handle[0]")
        np.testing.assert_array_equal(to_np(handle[0]), want_prefix)
        assert handle[4] is args["is_token_in_rank"]
        if not with_topk:
            assert recv_idx is None and recv_w is None
        combined, _, _ = buf.combine(recv_x, handle)
        check_kind(combined, kind, "Buffer.combine combined_x")
        want = d["x"].astype(np.float64) * d["in_rank"].sum(1, keepdims=True)
        np.testing.assert_array_equal(to_np(combined).astype(np.float64), want)
    # An asynchronous dispatch knows its counts at once (DeepEP returns them with the call).
    _, _, _, counts, handle, event = buf.dispatch(x, **args, async_finish=True)
    assert counts == want_counts
    event.current_stream_wait()
    # Cached: the handle fixes the routing, the dtype may change (FP8 first, then BF16, as DeepEP's tests do).
    x8 = (as_kind(d["x8"], kind), as_kind(d["sf"], kind))
    recv8, _, _, _, handle8, _ = buf.dispatch(x8, **args)
    again, r_idx, r_w, r_counts, r_handle, _ = buf.dispatch(x, handle=handle8)
    assert (r_idx, r_w, r_counts, r_handle) == (None, None, None, None)
    np.testing.assert_array_equal(to_np(again).astype(np.float64), want_x.astype(np.float64))
    want8 = np.stack([all_in[s]["x8"][t] for s, t in rows]) if rows else np.zeros((0, d["H"]), np.uint8)
    np.testing.assert_array_equal(to_np(recv8[0]).view(np.uint8), want8.view(np.uint8))


def check_low_latency_buffer(group, ranks, me):
    E, T, H, K = 4 * ranks, 8, 256, 2
    buf = deep_ep.Buffer(group, num_rdma_bytes=deep_ep.Buffer.get_low_latency_rdma_size_hint(T, H, ranks, E),
                         low_latency_mode=True)
    rng = np.random.default_rng(7 + me)
    x = torch.from_numpy(rng.standard_normal((T, H)).astype(np.float32)).to(torch.bfloat16)
    idx = torch.from_numpy(np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int64))
    _, _, handle, _, _ = buf.low_latency_dispatch(x, idx, T, E, use_fp8=False)
    first = buf.get_next_low_latency_combine_buffer(handle)
    check_kind(first, "torch", "get_next_low_latency_combine_buffer")
    assert tuple(first.shape) == (E // ranks, ranks * T, H) and first.dtype == torch.bfloat16
    # Zero-copy: the same memory every time, so filling it fills the buffer.
    assert buf.get_next_low_latency_combine_buffer(handle).data_ptr() == first.data_ptr()


def check_elastic(group, ranks, me, kind):
    all_in = [layout(r, ranks) for r in range(ranks)]
    d = all_in[me]
    buf = deep_ep.ElasticBuffer(group, num_max_tokens_per_rank=64, hidden=d["H"], num_topk=d["K"])
    x, idx = as_kind(d["x"].astype(BF16), kind), as_kind(d["idx"], kind)
    w = as_kind(np.ones((d["T"], d["K"]), np.float32), kind)
    recv_x, recv_idx, _, handle, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, num_experts=d["E"],
                                                  do_cpu_sync=1, do_handle_copy=True)
    check_kind(recv_x, kind, "ElasticBuffer.dispatch recv_x")
    for name in ("topk_idx", "psum_num_recv_tokens_per_scaleup_rank", "psum_num_recv_tokens_per_expert",
                 "recv_src_metadata", "dst_buffer_slot_idx"):
        value = getattr(handle, name)
        check_kind(value, kind, f"EPHandle.{name}")
        assert getattr(handle, name) is value, f"EPHandle.{name} is a new object per access"
    assert handle.topk_idx is not idx
    np.testing.assert_array_equal(to_np(handle.topk_idx), d["idx"])
    assert int(to_np(handle.psum_num_recv_tokens_per_scaleup_rank)[-1]) == len(expected_rows(all_in, me))
    # Asynchronous, no CPU sync: the handle's arrays are read once the dispatch completed.
    _, _, _, pending, event = buf.dispatch(x, topk_idx=idx, topk_weights=w, num_experts=d["E"], do_cpu_sync=False,
                                           async_with_compute_stream=True)
    np.testing.assert_array_equal(to_np(pending.psum_num_recv_tokens_per_scaleup_rank),
                                  to_np(handle.psum_num_recv_tokens_per_scaleup_rank))
    event.current_stream_wait()
    # do_handle_copy=False: DeepEP's handle holds the caller's topk_idx itself.
    _, _, _, aliasing, _ = buf.dispatch(x, topk_idx=idx, topk_weights=w, num_experts=d["E"], do_handle_copy=False)
    assert aliasing.topk_idx is idx
    # Cached dispatch returns recv_topk_idx again (the first dispatch's rows, a fresh array).
    cached_x, cached_idx, _, same, _ = buf.dispatch(x, handle=handle)
    assert same is handle and cached_idx is not None and cached_idx is not recv_idx
    np.testing.assert_array_equal(to_np(cached_idx), to_np(recv_idx))
    np.testing.assert_array_equal(to_np(cached_x).astype(np.float64), to_np(recv_x).astype(np.float64))
    scaleout, scaleup = deep_ep.get_logical_domain_size(group)
    assert scaleout * scaleup == ranks and deep_ep.get_physical_domain_size(group)[0] * \
        deep_ep.get_physical_domain_size(group)[1] == ranks


def check_sizes(group, ranks):
    # DeepEP's figure: every rank's tensor per shape, each padded to 32 bytes.
    got = deep_ep.ElasticBuffer.get_agrs_num_max_session_bytes(group, [(3, 5), (7,)], torch.bfloat16)
    assert got == (ranks * 30 + 31) // 32 * 32 + (ranks * 14 + 31) // 32 * 32, got
    assert deep_ep.ElasticBuffer.get_agrs_num_max_session_bytes(group, (4, 8), np.float32) == ranks * 128


def main():
    group = deep_ep.Group.world()
    ranks, me = group.size(), group.rank()
    check_sizes(group, ranks)
    for kind in ("numpy", "torch"):
        check_legacy(group, ranks, me, kind)
        check_elastic(group, ranks, me, kind)
    check_low_latency_buffer(group, ranks, me)
    group.barrier()
    print(f"DEEP_EP_COMPAT OK {me}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stdout.flush()
        sys.exit(1)
