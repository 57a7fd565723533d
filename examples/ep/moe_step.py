"""One MoE layer step across CPU ranks with tessera.deep_ep, checked against float64.

    x [T, H] bf16, top-k experts per token  --ElasticBuffer.dispatch-->   the rows each rank's experts need
    received rows                            --local experts (x @ W_e^T, weighted by the token's gate)-->
                                                written straight into get_combine_input_buffer (shared memory)
    expert outputs                           --ElasticBuffer.combine-->    out [T, H] on each token's own rank

combine reads the expert outputs in place from the contributing ranks' shared memory (no copy). Every rank
rebuilds every expert from a seed, so each checks its own tokens against float64:
    out[t] = sum_k gate[t, k] * (x[t] @ W[topk[t, k]]^T).
Run: mpirun -np 2 .venv/bin/python examples/ep/moe_step.py   (as root: add --allow-run-as-root)
"""
import sys

import ml_dtypes
import numpy as np

import tessera.deep_ep as deep_ep

T, H, E, K = 96, 256, 16, 4  # tokens per rank, hidden, experts, experts per token
BF16 = np.dtype(ml_dtypes.bfloat16)


def expert_weight(e):
    return np.random.default_rng(1000 + e).standard_normal((H, H)).astype(np.float32) / np.sqrt(H)


def rank_inputs(rank):
    rng = np.random.default_rng(7 + rank)
    x = rng.standard_normal((T, H)).astype(BF16)
    topk = np.stack([rng.choice(E, K, replace=False) for _ in range(T)]).astype(np.int64)
    gates = rng.random((T, K)).astype(np.float32)
    return x, topk, gates / gates.sum(axis=1, keepdims=True)


def main():
    group = deep_ep.Group.world()
    me, ranks = group.rank(), group.size()
    assert E % ranks == 0, "the experts must split evenly over the ranks"
    per_rank = E // ranks
    buf = deep_ep.ElasticBuffer(group, num_max_tokens_per_rank=T, hidden=H, num_topk=K)
    x, topk, gates = rank_inputs(me)

    recv_x, recv_topk, recv_gates, handle, _ = buf.dispatch(x, topk_idx=topk, topk_weights=gates, num_experts=E)
    # The local experts, written into the buffer's shared memory so combine reads them in place.
    y = buf.get_combine_input_buffer(handle)
    rows = recv_x.astype(np.float32)
    acc = np.zeros((handle.num_recv_tokens, H), np.float32)
    for lane in range(K):
        for le in range(per_rank):
            sel = recv_topk[:, lane] == le
            if sel.any():
                acc[sel] += recv_gates[sel, lane:lane + 1] * (rows[sel] @ expert_weight(me * per_rank + le).T)
    y[...] = acc.astype(BF16)
    out, _, _ = buf.combine(y, handle)

    want = np.zeros((T, H))
    for t in range(T):
        for k in range(K):
            want[t] += gates[t, k] * (x[t].astype(np.float64) @ expert_weight(int(topk[t, k])).T.astype(np.float64))
    got = out.astype(np.float64)
    diff = 1 - 2 * (got * want).sum() / ((got * got).sum() + (want * want).sum())
    ok = diff < 1e-4
    print(f"moe step rank {me}/{ranks}: {T} tokens, {handle.num_recv_tokens} received, calc_diff {diff:.2e} "
          f"{'PASSED' if ok else 'FAILED'}")
    group.barrier()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
