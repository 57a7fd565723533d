"""One rank of the Mega MoE tests, run by tests/python/test_mega_moe.py as
`mpirun -np N python mega_moe_worker.py` (or one plain process). Every rank rebuilds every rank's
inputs and weights from seeds and checks its own y and stats against the float64 reference of
tests/python/mega_moe_reference.py. Prints "MEGA_MOE_WORKER OK <rank>" at the end; failures raise."""
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import mega_moe_reference as ref  # noqa: E402
import tessera.deep_ep as deep_ep  # noqa: E402
import tessera.deep_gemm as dg  # noqa: E402


def main():
    group = deep_ep.Group.world()
    rank, ranks = group.rank(), group.size()
    if group.topology()["num_nodes"] > 1:  # pretend nodes: the first version needs one node
        try:
            dg.get_symm_buffer_for_mega_moe(group, 8, 16, 2, 128, 128)
        except NotImplementedError as e:
            assert "get_symm_buffer_for_mega_moe" in str(e) and "group" in str(e), e
            print(f"MEGA_MOE_WORKER OK {rank}", flush=True)
            return
        raise AssertionError("a group over several nodes must raise NotImplementedError")
    # Uneven token counts per rank, -1 slots, a token with no expert, several slots on one rank.
    ref.run_case(dg, group, rank, ranks, mma="fp8xfp4", tokens=(40, 23, 31, 9))
    ref.run_case(dg, group, rank, ranks, mma="bf16xbf16", tokens=(17, 44), clamp=0.75)
    # One hot expert (more slots than one block holds, from both ranks), the last expert of the last rank gets nothing.
    ref.run_case(dg, group, rank, ranks, mma="fp8xfp4", tokens=(200, 90), max_tokens=200, hot=1, clamp=2.0,
                 sf_kind="float32")
    # A rank with no tokens at all.
    ref.run_case(dg, group, rank, ranks, mma="fp8xfp4", tokens=(30, 0))
    if os.environ.get("MEGA_MOE_TORCH_PORT"):
        torch_group_case(rank, ranks, int(os.environ["MEGA_MOE_TORCH_PORT"]))
    print(f"MEGA_MOE_WORKER OK {rank}", flush=True)


def torch_group_case(rank, ranks, port, tokens=(21, 34), hidden=128, inter=64, experts=4, topk=2):
    """DeepGEMM's calling convention: a torch.distributed group of the mpirun job, torch tensors."""
    import numpy as np
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    epr = experts // ranks
    buf = dg.get_symm_buffer_for_mega_moe(dist.group.WORLD, experts, 40, topk, hidden, inter, mma_type="bf16xbf16")
    assert isinstance(buf.x, torch.Tensor) and buf.x.dtype == torch.bfloat16
    inputs = [ref.make_rank_inputs(r, ranks, tokens[r % 2], hidden, experts, topk, 9) for r in range(ranks)]
    raw = [ref.make_weights(epr, hidden, inter, r, 9) for r in range(ranks)]
    x, idx, w = inputs[rank]
    T = x.shape[0]
    buf.x[:T].copy_(torch.from_numpy(x).to(torch.bfloat16))
    buf.topk_idx[:T].copy_(torch.from_numpy(idx))
    buf.topk_weights[:T].copy_(torch.from_numpy(w))
    l1, l2 = dg.transform_weights_for_mega_moe(*(torch.from_numpy(a).to(torch.bfloat16) for a in raw[rank]))
    y = torch.empty(T, hidden, dtype=torch.bfloat16)
    stats = torch.zeros(epr, dtype=torch.int32)
    dg.bf16_mega_moe(y, l1, l2, buf, cumulative_local_expert_recv_stats=stats, activation_clamp=1.0)
    l1_of = lambda e: ref.to_bf16(raw[e // epr][0][e % epr])
    l2_of = lambda e: ref.to_bf16(raw[e // epr][1][e % epr])
    want = ref.reference(ref.to_bf16(x), idx, w, l1_of, l2_of, epr, False, 1.0)
    got = y.float().numpy().astype(np.float64)
    assert ref.calc_diff(got, want) < 2e-6, ref.calc_diff(got, want)
    all_idx = np.concatenate([i for _, i, _ in inputs])
    assert stats.tolist() == [int((all_idx == rank * epr + e).sum()) for e in range(epr)]
    buf.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        # Leave at once: a normal exit would finalise MPI and wait for the ranks still running.
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
