"""One rank of the tessera.deep_ep Python tests, run by tests/python/test_deep_ep.py as
`mpirun -np N python deep_ep_worker.py`. Every rank rebuilds every rank's inputs from a seed, so the
expected results come from numpy, independently of the transport. Prints "DEEP_EP_WORKER OK <rank>"
at the end; any failure raises (non-zero exit)."""
import os
import sys
import traceback

import ml_dtypes
import numpy as np

import tessera.deep_ep as deep_ep

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


def inputs(rank, ranks, tokens=67, hidden=256, topk=6, experts_per_rank=8, seed=5):
    rng = np.random.default_rng(seed * 1000 + rank)
    T, E = max(1, tokens - 3 * rank), experts_per_rank * ranks
    x = rng.standard_normal((T, hidden)).astype(BF16)
    scores = rng.standard_normal((T, E)) + np.sin(np.arange(E))
    idx = np.argsort(-scores, axis=1)[:, :topk].astype(np.int64)
    idx[rng.random((T, topk)) < 0.1] = -1
    idx[5 % T] = -1
    w = rng.random((T, topk)).astype(np.float32)
    x8 = rng.integers(0, 0x7E, (T, hidden), dtype=np.uint8).view(E4M3)
    sf = rng.random((T, hidden // 128)).astype(np.float32)
    return dict(x=x, idx=idx, w=w, x8=x8, sf=sf, T=T, E=E, K=topk, H=hidden)


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def expect_equal(got, want, what):
    if got.shape != want.shape or not np.array_equal(bits(got), bits(want)):
        raise AssertionError(f"rank {RANK}: {what} differs: shapes {got.shape} vs {want.shape}")


def ref_rows(all_in, me, ranks):
    """(source, token) pairs this rank receives, in order."""
    rows = []
    for s, d in enumerate(all_in):
        epr = d["E"] // ranks
        for t in range(d["T"]):
            owners = {int(e) // epr for e in d["idx"][t] if e >= 0}
            if me in owners:
                rows.append((s, t))
    return rows


def check_elastic(group, ranks, me):
    all_in = [inputs(r, ranks) for r in range(ranks)]
    mine = all_in[me]
    K, H, E = mine["K"], mine["H"], mine["E"]
    epr = E // ranks
    buf = deep_ep.ElasticBuffer(group, num_max_tokens_per_rank=128, hidden=H, num_topk=K, num_cpu_timeout_secs=60)
    assert buf.num_ranks == ranks and buf.rank_idx == me
    rows = ref_rows(all_in, me, ranks)

    # Non-expanded bf16: rows, local experts, raw weights, metadata.
    recv_x, recv_idx, recv_w, handle, event = buf.dispatch(mine["x"], topk_idx=mine["idx"], topk_weights=mine["w"],
                                                           num_experts=E)
    event.current_stream_wait()
    want_x = np.stack([all_in[s]["x"][t] for s, t in rows]) if rows else np.zeros((0, H), BF16)
    expect_equal(recv_x, want_x, "recv_x")
    want_idx = np.array([[e - me * epr if e >= 0 and e // epr == me else -1 for e in all_in[s]["idx"][t]]
                         for s, t in rows], dtype=np.int64).reshape(-1, K)
    expect_equal(recv_idx, want_idx, "recv_topk_idx")
    expect_equal(recv_w, np.stack([all_in[s]["w"][t] for s, t in rows]).reshape(-1, K), "recv_topk_weights")
    assert handle.num_recv_tokens == len(rows)
    assert list(handle.recv_src_metadata[:, 0]) == [s * 128 + t for s, t in rows]

    # FP8 with scale packs; the pair comes back.
    (r8, rsf), _, _, _, _ = buf.dispatch((mine["x8"], mine["sf"]), topk_idx=mine["idx"], num_experts=E)
    expect_equal(r8, np.stack([all_in[s]["x8"][t] for s, t in rows]), "fp8 recv_x")
    expect_equal(rsf, np.stack([all_in[s]["sf"][t] for s, t in rows]), "recv_sf")

    # Expanded layout: per-expert aligned blocks, zero padding, psum semantics.
    ex, _, ew, eh, _ = buf.dispatch(mine["x"], topk_idx=mine["idx"], topk_weights=mine["w"], num_experts=E,
                                    do_expand=True, expert_alignment=4, do_zero_padding=True)
    start = 0
    for e in range(epr):
        members = [(s, t, k) for s, d in enumerate(all_in) for t in range(d["T"]) for k in range(K)
                   if d["idx"][t, k] == me * epr + e]
        n, aligned = len(members), (len(members) + 3) // 4 * 4
        for i, (s, t, k) in enumerate(members):
            expect_equal(ex[start + i], all_in[s]["x"][t], f"expanded row of expert {e}")
            assert ew[start + i] == all_in[s]["w"][t, k]
        assert not np.any(bits(ex[start + n:start + aligned]))
        assert eh.num_unaligned_recv_tokens_per_expert[e] == n
        assert eh.psum_num_recv_tokens_per_expert[e] == start + n
        start += aligned
    assert eh.num_expanded_tokens == start

    # Cached dispatch equals fresh; async without CPU sync is worst-case sized.
    cx, cidx, _, same, _ = buf.dispatch(mine["x"], handle=handle)
    expect_equal(cx, recv_x, "cached recv_x")
    # As DeepEP, the cached dispatch returns recv_topk_idx again (the first dispatch's rows).
    assert same is handle and cidx is not recv_idx
    expect_equal(cidx, recv_idx, "cached recv_topk_idx")
    ax, _, _, ah, aev = buf.dispatch(mine["x"], topk_idx=mine["idx"], num_experts=E, async_with_compute_stream=True,
                                     do_cpu_sync=False)
    assert ax.shape[0] == ranks * 128
    with aev:
        pass
    expect_equal(ax[:ah.num_recv_tokens], recv_x, "async recv_x")

    # Combine: bias pair, then destinations in ascending order of their last top-k lane.
    y = (recv_x.astype(np.float32) * (1 + 0.25 * me)).astype(BF16)
    rng = np.random.default_rng(99 + me)
    b0 = rng.standard_normal((mine["T"], H)).astype(BF16)
    b1 = rng.standard_normal((mine["T"], H)).astype(BF16)
    combined, cw, _ = buf.combine(y, handle, topk_weights=recv_w, bias=(b0, b1))
    # Hybrid mode: the ranks of another node are summed at its forwarder first (one bf16 rounding).
    node_of = group.topology()["node_of"]
    my_node = node_of[me]

    def key(d):
        return d if not buf.hybrid_mode or node_of[d] == my_node else ("node", node_of[d])

    def last_lane_order(items):
        return [d for k, d in enumerate(items) if d is not None and d not in items[k + 1:]]

    want = np.zeros((mine["T"], H), BF16)
    for t in range(mine["T"]):
        xt = mine["x"][t].astype(np.float32)

        def part(d):
            return (xt * np.float32(1 + 0.25 * d)).astype(BF16).astype(np.float32)

        owners = [int(e) // epr if e >= 0 else None for e in mine["idx"][t]]
        acc = np.zeros(H, np.float32) + b0[t].astype(np.float32) + b1[t].astype(np.float32)
        for k in last_lane_order([None if d is None else key(d) for d in owners]):
            if not isinstance(k, tuple):
                acc = acc + part(k)
                continue
            partial = np.zeros(H, np.float32)
            for d in last_lane_order([d if d is not None and node_of[d] == k[1] else None for d in owners]):
                partial = partial + part(d)
            acc = acc + partial.astype(BF16).astype(np.float32)
        want[t] = acc.astype(BF16)
    expect_equal(combined, want, "combined_x")
    expect_equal(cw, np.where(mine["idx"] >= 0, mine["w"], 0).astype(np.float32), "combined_topk_weights")
    # The same with x in the buffer's shared memory (read in place by the sources on this node).
    xin = buf.get_combine_input_buffer(handle)
    assert xin.shape == y.shape and xin.dtype == BF16
    xin[...] = y
    combined_in_place, _, _ = buf.combine(xin, handle, topk_weights=recv_w, bias=(b0, b1))
    expect_equal(combined_in_place, want, "combined_x (x from get_combine_input_buffer)")

    # Bad input: clear errors, buffer still usable.
    for kwargs, fragment in ((dict(num_experts=E + 1), "divisible" if ranks > 1 else "topk"),
                             (dict(num_experts=E, topk_idx=mine["idx"].astype(np.int32)), "topk_idx")):
        args = dict(topk_idx=mine["idx"], num_experts=E)
        args.update(kwargs)
        try:
            buf.dispatch(mine["x"], **args)
            if fragment != "topk":
                raise AssertionError(f"rank {me}: no error for {kwargs}")
        except ValueError as e:
            assert fragment in str(e), str(e)
    too_many = np.zeros((129, H), BF16)
    try:
        buf.dispatch(too_many, topk_idx=np.full((129, K), -1, np.int64), num_experts=E)
        raise AssertionError("no error for T > num_max_tokens_per_rank")
    except ValueError as e:
        assert "num_max_tokens_per_rank" in str(e)
    # Engram: every rank's 5 entries, fetched by global index (one node only: pretend nodes raise).
    table = (np.arange(5 * 32, dtype=np.float32).reshape(5, 32) + me * 1000).astype(BF16)
    if group.topology()["num_nodes"] == 1:
        buf.engram_write(table)
        idx = np.array([[0, 5 * ranks - 1], [3, 1]], np.int32)
        data, sf = buf.engram_fetch(idx)()
        assert data.shape == (2, 64) and sf is None
        for t in range(2):
            for p in range(2):
                g = int(idx[t, p])
                want = (np.arange(32, dtype=np.float32) + (g % 5) * 32 + (g // 5) * 1000).astype(BF16)
                assert np.array_equal(data[t, p * 32:(p + 1) * 32], want), (me, t, p)
    else:
        try:
            buf.engram_write(table)
            raise AssertionError("engram_write across nodes did not raise")
        except NotImplementedError:
            pass

    # Pipeline-parallel FIFO to the next rank (two tensors in flight), received from the previous.
    nxt, prv = (me + 1) % ranks, (me - 1) % ranks
    buf.pp_set_config(4096, 2)
    for m in range(2):
        buf.pp_send(np.full(100 + m, me * 10 + m, np.float32), nxt)
    for m in range(2):
        got = np.empty(100 + m, np.float32)
        buf.pp_recv(got, prv)
        assert np.all(got == prv * 10 + m), (me, m, got[:4])
    # An all-gather session: an in-place slot, then a batched gather of two arrays.
    buf.agrs_set_config(ranks * 1024, 4)
    with buf.agrs_new_session():
        part = buf.agrs_get_inplace_tensor((4, 8), BF16)
        part[...] = me + 1
        gathered, handle = buf.all_gather(part)
        a, b, handle2 = buf.all_gather([np.full(8, me, np.float32), np.arange(16, dtype=np.int32) + me])
        handle()
        handle2()
        assert gathered.shape == (ranks, 4, 8) and gathered.dtype == BF16
        assert a.shape == (ranks, 8) and b.shape == (ranks, 16)
        for r in range(ranks):
            assert np.all(gathered[r].astype(np.float32) == r + 1), (me, r)
            assert np.all(a[r] == r) and np.all(b[r] == np.arange(16) + r), (me, r)


def calc_diff(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    denominator = (x * x + y * y).sum()
    return 1 - 2 * (x * y).sum() / denominator if denominator else 0.0


def check_legacy(group, ranks, me):
    all_in = [inputs(r, ranks, hidden=512) for r in range(ranks)]
    mine = all_in[me]
    H, E = mine["H"], mine["E"]
    epr = E // ranks
    buf = deep_ep.Buffer(group, num_nvl_bytes=8 << 20, num_cpu_timeout_secs=60)
    per_rank, per_node, per_expert, in_rank, _ = buf.get_dispatch_layout(mine["idx"], E)
    owners = np.where(mine["idx"] >= 0, mine["idx"] // epr, -1)
    want_in_rank = np.stack([(owners == r).any(axis=1) for r in range(ranks)], axis=1)
    expect_equal(in_rank, want_in_rank, "is_token_in_rank")
    expect_equal(per_rank, want_in_rank.sum(axis=0).astype(np.int32), "num_tokens_per_rank")
    expect_equal(per_expert, np.bincount(mine["idx"][mine["idx"] >= 0], minlength=E).astype(np.int32),
                 "num_tokens_per_expert")
    # x = rank: every received row from source i is all i.
    x = np.full((mine["T"], H), me, dtype=BF16)
    recv_x, recv_idx, recv_w, counts, handle, _ = buf.dispatch(
        x, num_tokens_per_rank=per_rank, num_tokens_per_rdma_rank=per_node, is_token_in_rank=in_rank,
        num_tokens_per_expert=per_expert, topk_idx=mine["idx"], topk_weights=mine["w"])
    rows = ref_rows(all_in, me, ranks)
    assert recv_x.shape[0] == len(rows)
    for i, (s, _) in enumerate(rows):
        assert np.all(recv_x[i].astype(np.float32) == s), f"rank {me}: row {i} is not all {s}"
    assert len(counts) == epr
    # combine(dispatched x) / number of destination ranks == x.
    combined, _, _ = buf.combine(recv_x, handle)
    ndst = want_in_rank.sum(axis=1).astype(np.float32)
    sent = ndst > 0  # tokens without experts come back as zeros
    got = combined.astype(np.float32)[sent] / ndst[sent][:, None]
    assert calc_diff(got, x.astype(np.float32)[sent]) < 5e-6
    assert not np.any(combined.astype(np.float32)[~sent])
    # Low latency: counts are the global selection counts; combine(x) == x * sum of weights.
    ll = deep_ep.Buffer(group, num_rdma_bytes=deep_ep.Buffer.get_low_latency_rdma_size_hint(80, H, ranks, E),
                        low_latency_mode=True, num_cpu_timeout_secs=60)
    xs = mine["x"]
    (rx, scales), rcount, lh, _, hook = ll.low_latency_dispatch(xs, mine["idx"], 80, E, return_recv_hook=True,
                                                               round_scale=True, use_ue8m0=True)
    hook()
    want_count = [sum(int((d["idx"] == me * epr + e).sum()) for d in all_in) for e in range(epr)]
    assert list(rcount) == want_count, (list(rcount), want_count)
    assert scales.dtype == np.int32 and scales.shape == (epr, ranks * 80, H // 512)
    bx, bcount, bh, bev, _ = ll.low_latency_dispatch(xs, mine["idx"], 80, E, use_fp8=False, async_finish=True)
    bev.current_stream_wait()
    out, _, _ = ll.low_latency_combine(bx, mine["idx"], mine["w"], bh)
    want = xs.astype(np.float32) * np.where(mine["idx"] >= 0, mine["w"], 0).sum(axis=1)[:, None]
    assert calc_diff(out.astype(np.float32), want) < 1e-5


if __name__ == "__main__":
    group = deep_ep.Group.world()
    RANK = group.rank()
    try:
        check_elastic(group, group.size(), RANK)
        check_legacy(group, group.size(), RANK)
    except BaseException:
        # Leave at once: a normal exit would finalise MPI and wait for the ranks still running.
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    print(f"DEEP_EP_WORKER OK {RANK} ({group.topology()['description']})", flush=True)
