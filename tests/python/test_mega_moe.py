"""tessera.deep_gemm's Mega MoE (SymmBuffer, get_symm_buffer_for_mega_moe, transform_weights_for_mega_moe,
fp8_fp4_mega_moe, bf16_mega_moe) against the float64 reference of mega_moe_reference.py: one rank
in this process (no MPI), several ranks through mpirun running tests/mpi/mega_moe_worker.py."""
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mega_moe_reference as ref
import tessera
import tessera.deep_ep as deep_ep
import tessera.deep_gemm as dg

WORKER = Path(__file__).resolve().parents[1] / "mpi" / "mega_moe_worker.py"
MPIRUN = shutil.which("mpirun")


@pytest.mark.parametrize("mma", ["fp8xfp4", "bf16xbf16"])
@pytest.mark.parametrize("case", [
    dict(),
    dict(clamp=0.5),
    dict(hot=2, tokens=(300,), max_tokens=320, clamp=3.0),  # several blocks for one expert, idle experts
    dict(sf_kind="float32", masked=0.5, topk=4),
    dict(tokens=(0,)),
    dict(tokens=(5,), experts=2, topk=2, masked=0.0),
], ids=["plain", "clamp", "hot_expert", "float_sf_masked", "no_tokens", "all_experts"])
def test_one_rank_matches_reference(mma, case):
    ref.run_case(dg, None, 0, 1, mma=mma, **case)


@pytest.mark.parametrize("case", [dict(hot=0, tokens=(300,), max_tokens=300), dict(tokens=(3,), masked=0.0, experts=2, topk=1, hot=0)],
                         ids=["pulled_items", "one_item_pooled_gemms"])
@pytest.mark.parametrize("mma", ["fp8xfp4", "bf16xbf16"])
def test_bitwise_identical_for_1_and_2_threads(mma, case):
    old = tessera.num_threads()
    try:
        tessera.set_num_threads(1)
        one = ref.run_case(dg, None, 0, 1, mma=mma, **case)
        tessera.set_num_threads(2)
        two = ref.run_case(dg, None, 0, 1, mma=mma, **case)
    finally:
        tessera.set_num_threads(old)
    assert np.array_equal(one.view(np.uint16), two.view(np.uint16))


def test_buffer_views_and_names():
    buf = dg.get_symm_buffer_for_mega_moe(None, 8, 12, 3, 256, 128)
    assert buf.x.shape == (12, 256) and buf.x.dtype == ref.E4M3
    assert buf.x_sf.shape == (12, 2) and buf.x_sf.dtype == np.int32
    assert buf.topk_idx.shape == (12, 3) and buf.topk_idx.dtype == np.int64
    assert buf.topk_weights.shape == (12, 3) and buf.topk_weights.dtype == np.float32
    assert buf.l1_acts is None and buf.num_max_tokens_per_rank == 12
    buf.destroy()
    b16 = dg.get_symm_buffer_for_mega_moe(None, 8, 12, 3, 96, 64, mma_type="bf16xbf16")
    assert b16.x.dtype == ref.BF16 and b16.x_sf is None
    with pytest.warns(DeprecationWarning):
        dg.get_symm_buffer_for_mega_moe(None, 8, 4, 2, 128, 128, use_fp8_dispatch=True)
    for name in ("SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe",
                 "fp8_fp4_mega_moe", "bf16_mega_moe"):
        assert name in dg.__all__ and hasattr(dg, name)


def test_torch_group_of_one_gives_torch_views():
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("torch.distributed not available")
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        _bf16_call_with_torch(torch, dist)
    finally:
        if created:
            dist.destroy_process_group()


def _bf16_call_with_torch(torch, dist):
    buf = dg.get_symm_buffer_for_mega_moe(dist.group.WORLD, 4, 8, 2, 128, 128, mma_type="bf16xbf16")
    assert isinstance(buf.x, torch.Tensor) and buf.x.dtype == torch.bfloat16
    l1 = torch.randn(4, 256, 128).to(torch.bfloat16)
    l2 = torch.randn(4, 128, 128).to(torch.bfloat16)
    buf.x[:3] = torch.randn(3, 128).to(torch.bfloat16)
    buf.topk_idx[:3] = torch.tensor([[0, 3], [-1, -1], [2, 0]])
    buf.topk_weights[:3] = torch.tensor([[0.5, 0.5], [0.0, 0.0], [1.0, 0.25]])
    y = torch.empty(3, 128, dtype=torch.bfloat16)
    stats = torch.zeros(4, dtype=torch.int32)
    dg.bf16_mega_moe(y, *dg.transform_weights_for_mega_moe(l1, l2), buf, cumulative_local_expert_recv_stats=stats)
    assert stats.tolist() == [2, 0, 1, 1] and torch.equal(y[1], torch.zeros(128, dtype=torch.bfloat16))


def _fp8_setup(tokens=4, experts=4, topk=2, hidden=128, inter=128):
    buf = dg.get_symm_buffer_for_mega_moe(None, experts, 8, topk, hidden, inter)
    l1, l2 = ref.quantised_weights(dg, *ref.make_weights(experts, hidden, inter, 0, 3), "int32")
    buf.topk_idx[:tokens] = 0
    buf.topk_weights[:tokens] = 1
    return buf, l1, l2, np.zeros((tokens, hidden), ref.BF16)


def test_named_errors():
    with pytest.raises(tessera.InvalidArgumentError, match="mma_type"):
        dg.get_symm_buffer_for_mega_moe(None, 8, 4, 2, 128, 128, mma_type="fp4xfp4")
    with pytest.raises(tessera.InvalidArgumentError, match="hidden"):
        dg.get_symm_buffer_for_mega_moe(None, 8, 4, 2, 96, 128)
    with pytest.raises(tessera.InvalidArgumentError, match="num_topk"):
        dg.get_symm_buffer_for_mega_moe(None, 2, 4, 3, 128, 128)
    with pytest.raises(tessera.InvalidArgumentError, match="use_fp8_dispatch"):
        dg.get_symm_buffer_for_mega_moe(None, 8, 4, 2, 128, 128, use_fp8_dispatch=False)
    with pytest.raises(tessera.InvalidArgumentError, match="activation"):
        dg.get_symm_buffer_for_mega_moe(None, 8, 4, 2, 128, 128, activation="gelu")
    buf, l1, l2, y = _fp8_setup()
    call = dg.fp8_fp4_mega_moe
    cases = [
        (dict(y=y.astype(np.float32)), "'y'"),
        (dict(y=np.zeros((9, 128), ref.BF16)), "num_max_tokens_per_rank"),
        (dict(l1_weights=(l1[0][:, :128], l1[1])), r"l1_weights\[0\]"),
        (dict(l2_weights=(l2[0], l2[1][:3])), r"l2_weights\[1\]"),
        (dict(cumulative_local_expert_recv_stats=np.zeros(4, np.int64)), "cumulative_local_expert_recv_stats"),
        (dict(recipe=(1, 1, 128)), "recipe"),
        (dict(activation="relu"), "activation"),
        (dict(activation_clamp=-1.0), "activation_clamp"),
    ]
    for override, pattern in cases:
        kwargs = dict(y=y, l1_weights=l1, l2_weights=l2, sym_buffer=buf)
        kwargs.update(override)
        with pytest.raises(tessera.InvalidArgumentError, match=pattern):
            call(**kwargs)
    buf.topk_idx[2, 1] = 4
    with pytest.raises(tessera.InvalidArgumentError, match="topk_idx"):
        call(y, l1, l2, buf)
    buf.topk_idx[2, 1] = -1
    call(y, l1, l2, buf)  # the buffer is still usable
    with pytest.raises(tessera.InvalidArgumentError, match="sym_buffer"):
        dg.bf16_mega_moe(y, l1[0], l2[0], buf)
    buf.destroy()
    with pytest.raises(tessera.InvalidArgumentError, match="destroyed"):
        call(y, l1, l2, buf)


def _env(ranks_per_node=0):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_hwloc_base_binding_policy="none", TESSERA_NUM_THREADS="1",
               TESSERA_EP_RANKS_PER_NODE=str(ranks_per_node))
    return env


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(MPIRUN is None or not deep_ep.mpi_available(), reason="needs mpirun and an MPI build")
@pytest.mark.parametrize("ranks,ranks_per_node", [(2, 0), (2, 1)], ids=["2ranks", "2ranks_2pretend_nodes"])
def test_ranks_under_mpirun(ranks, ranks_per_node):
    env = _env(ranks_per_node)
    if ranks_per_node == 0 and importlib.util.find_spec("torch") is not None:
        env["MEGA_MOE_TORCH_PORT"] = str(_free_port())  # also DeepGEMM's convention: a torch group
    proc = subprocess.run([MPIRUN, "-np", str(ranks), sys.executable, str(WORKER)], env=env,
                          capture_output=True, text=True, timeout=240)
    oks = proc.stdout.count("MEGA_MOE_WORKER OK")
    assert proc.returncode == 0 and oks == ranks, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
