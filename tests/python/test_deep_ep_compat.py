"""DeepEP call-compatibility of tessera.deep_ep: torch tensors in, torch tensors out (numpy in, numpy
out), DeepEP's return shapes and figures, and the legacy dispatch without top-k (rows and counts).
The collective checks run in deep_ep_compat_worker.py under mpirun (2 ranks) and as one process; the
pytest process itself never initialises MPI."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera.deep_ep as deep_ep

torch = pytest.importorskip("torch")

WORKER = Path(__file__).resolve().parent / "deep_ep_compat_worker.py"
MPIRUN = shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(not deep_ep.mpi_available(), reason="tessera was built without MPI")


def _env(ranks_per_node=0):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_hwloc_base_binding_policy="none", TESSERA_NUM_THREADS="1",
               TESSERA_EP_RANKS_PER_NODE=str(ranks_per_node))
    return env


def _run(cmd, ranks, ranks_per_node=0):
    proc = subprocess.run(cmd, env=_env(ranks_per_node), capture_output=True, text=True, timeout=300)
    oks = proc.stdout.count("DEEP_EP_COMPAT OK")
    assert proc.returncode == 0 and oks == ranks, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"


@needs_mpi
@pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")
@pytest.mark.parametrize("ranks,ranks_per_node", [(2, 0), (4, 2)], ids=["2ranks", "4ranks_2pretend_nodes"])
def test_compat_ranks(ranks, ranks_per_node):
    _run([MPIRUN, "-np", str(ranks), sys.executable, str(WORKER)], ranks, ranks_per_node)


@needs_mpi
def test_compat_single_process():
    _run([sys.executable, str(WORKER)], 1)


def test_topk_idx_t_is_torch_int64_with_torch():
    assert deep_ep.topk_idx_t is torch.int64
    t = torch.tensor([[3, 1]], dtype=torch.int32).to(deep_ep.topk_idx_t)
    assert t.dtype == torch.int64


def test_import_without_torch_gives_numpy_topk_idx_t():
    code = ("import sys, numpy as np, tessera.deep_ep as d; "
            "assert 'torch' not in sys.modules; assert d.topk_idx_t is np.int64; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_engram_storage_size_hint_is_deepep_pair():
    mib2 = 2 << 20
    align = lambda n, a: (n + a - 1) // a * a  # noqa: E731
    # Default dtype bfloat16: entries of hidden * 2 bytes padded to 32.
    assert deep_ep.ElasticBuffer.get_engram_storage_size_hint(1000, 7168, 64) == \
        (align(7168 * 2 * 64, mib2), align(7168 * 2 * 1000, mib2))
    assert deep_ep.ElasticBuffer.get_engram_storage_size_hint(100, 100, 3, torch.float8_e4m3fn) == (mib2, mib2)
    assert deep_ep.ElasticBuffer.get_engram_storage_size_hint(1 << 16, 16, 1, np.float32) == (mib2, 2 * mib2)


def test_pp_buffer_size_hint_is_a_valid_num_bytes():
    assert deep_ep.ElasticBuffer.get_pp_buffer_size_hint(1000, 3) == 2 << 20
    assert deep_ep.ElasticBuffer.get_pp_buffer_size_hint(1 << 20, 4) == 16 << 20


def test_config_size_hints():
    config = deep_ep.Config(24, 6, 256, 6, 128)
    per_token = 7168 + 128 * 12 + 128 * 4 + 16
    assert config.get_nvl_buffer_size_hint(7168, 8) == (12 * 8 * 256 * per_token + 127) // 128 * 128
    assert config.get_rdma_buffer_size_hint(7168, 16) == 0


def test_fp8_paths_are_reported_available():
    assert deep_ep.Buffer.is_sm90_compiled() is True


def test_event_overlap_release_handle():
    seen = []
    ev = deep_ep.EventOverlap(None, extra_tensors=(np.zeros(3),))
    ev.register_hook_after_wait(lambda: seen.append(1))
    with ev(release_handle=True) as inner:
        assert inner is ev
    assert seen == [1] and ev.extra_tensors is None
    ev = deep_ep.EventOverlap(None, extra_tensors=(np.zeros(3),))
    ev.current_stream_wait(release_handle=False)
    assert ev.extra_tensors is not None
    ev.current_stream_wait(release_handle=True)
    assert ev.extra_tensors is None


def test_bad_dtype_names_function_and_argument():
    with pytest.raises(TypeError, match=r"ElasticBuffer.get_engram_storage_size_hint: argument 'dtype'"):
        deep_ep.ElasticBuffer.get_engram_storage_size_hint(10, 128, 4, object())


def test_bad_legacy_handle_names_function_and_argument():
    with pytest.raises(TypeError, match=r"Buffer.combine: argument 'handle' must be the handle Buffer.dispatch"):
        from tessera.deep_ep._legacy import _native_handle
        _native_handle((1, 2), "Buffer.combine")
