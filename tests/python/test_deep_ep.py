"""tessera.deep_ep across processes: each test starts ranks with mpirun (or one plain process) running
tests/mpi/deep_ep_worker.py, which checks ElasticBuffer and Buffer against numpy references and
prints one OK line per rank. The pytest process itself never initialises MPI."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera.deep_ep as deep_ep

WORKER = Path(__file__).resolve().parents[1] / "mpi" / "deep_ep_worker.py"
MPIRUN = shutil.which("mpirun")

pytestmark = pytest.mark.skipif(not deep_ep.mpi_available(), reason="tessera was built without MPI")


def _env(ranks_per_node=0):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_hwloc_base_binding_policy="none", TESSERA_NUM_THREADS="1",
               TESSERA_EP_RANKS_PER_NODE=str(ranks_per_node))
    return env


def _run(cmd, env, ranks):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    oks = proc.stdout.count("DEEP_EP_WORKER OK")  # mpirun may join lines of different ranks
    assert proc.returncode == 0 and oks == ranks, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")
@pytest.mark.parametrize("ranks,ranks_per_node", [(2, 0), (4, 2)], ids=["2ranks", "4ranks_2pretend_nodes"])
def test_deep_ep_ranks(ranks, ranks_per_node):
    _run([MPIRUN, "-np", str(ranks), sys.executable, str(WORKER)], _env(ranks_per_node), ranks)


def test_deep_ep_single_process():
    _run([sys.executable, str(WORKER)], _env(), 1)


def test_api_surface_without_mpi_init():
    assert np.dtype(deep_ep.topk_idx_t).itemsize == 8 if not hasattr(deep_ep.topk_idx_t, "is_floating_point") \
        else deep_ep.topk_idx_t.itemsize == 8
    for name in ("dispatch", "combine", "get_buffer_size_hint", "barrier", "destroy", "capture",
                 "get_theoretical_num_sms", "engram_write", "pp_send", "agrs_set_config"):
        assert hasattr(deep_ep.ElasticBuffer, name), name
    for name in ("get_dispatch_layout", "dispatch", "combine", "low_latency_dispatch", "low_latency_combine",
                 "get_low_latency_rdma_size_hint", "clean_low_latency_buffer"):
        assert hasattr(deep_ep.Buffer, name), name
    # DeepEP's size figures for the experimental primitives.
    import ml_dtypes
    # (receive bytes, storage bytes), each a multiple of 2 MiB (test_deep_ep_compat.py checks the figures).
    assert deep_ep.ElasticBuffer.get_engram_storage_size_hint(100, 7168, 64) == (2 << 20, 2 << 20)
    assert deep_ep.ElasticBuffer.get_engram_storage_size_hint(100, 7168, 64, ml_dtypes.float8_e4m3fn) == (2 << 20, 2 << 20)
    assert deep_ep.ElasticBuffer.get_pp_buffer_size_hint(1000, 3) == 2 << 20
    with deep_ep.EventOverlap() as ev:
        ev.register_hook_after_wait(lambda: None)
    with pytest.raises(TypeError):
        deep_ep.ElasticBuffer(object(), num_max_tokens_per_rank=8, hidden=128)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ep" / "moe_step.py"


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")
def test_moe_step_example_passes():
    """examples/ep/moe_step.py: dispatch -> local experts into get_combine_input_buffer -> combine, each
    rank's tokens against float64."""
    proc = subprocess.run([MPIRUN, "-np", "2", sys.executable, str(EXAMPLE)], env=_env(), capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0 and proc.stdout.count("PASSED") == 2 and "FAILED" not in proc.stdout, \
        f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
