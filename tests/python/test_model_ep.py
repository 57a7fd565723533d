"""tessera.model's expert parallelism from Python: tests/mpi/model_ep_worker.py run as one plain process
and under ``mpirun -np 2`` (ep_group = tessera.deep_ep.Group.world()) must save bitwise identical logits
and hidden states for every sequence and step (batch_invariant; a tiny FP8 checkpoint with two MoE
layers whose tokens reach experts on both ranks). The pytest process itself never initialises MPI."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera.deep_ep as deep_ep
from tessera import ArgumentTypeError, InvalidArgumentError, NotImplementedInTessera
from tessera.model import Model
from tessera.model.random_checkpoint import write_random_checkpoint

WORKER = Path(__file__).resolve().parents[1] / "mpi" / "model_ep_worker.py"
TINY = Path(__file__).resolve().parents[2] / "python" / "tessera" / "model" / "configs" / "tiny.json"
MPIRUN = shutil.which("mpirun")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    config = json.loads(TINY.read_text())
    config.update(n_layers=3, n_limited_groups=2)  # two MoE layers; a token's experts on either rank
    path = tmp_path_factory.mktemp("model_ep") / "ckpt"
    write_random_checkpoint(config, path, seed=5, num_files=1, progress=False)
    return path


def _run(cmd, ranks):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_hwloc_base_binding_policy="none",
               TESSERA_NUM_THREADS="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    oks = proc.stdout.count("MODEL_EP_WORKER OK")
    assert proc.returncode == 0 and oks == ranks, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.skipif(MPIRUN is None or not deep_ep.mpi_available(), reason="needs mpirun and an MPI build")
def test_two_ranks_equal_one_rank_bitwise(checkpoint, tmp_path):
    _run([sys.executable, str(WORKER), str(checkpoint), str(tmp_path / "one")], 1)
    _run([MPIRUN, "-np", "2", sys.executable, str(WORKER), str(checkpoint), str(tmp_path / "two"), "parallel"], 2)
    names = sorted(os.listdir(tmp_path / "one"))
    assert names == ["seq0.npz", "seq1.npz", "seq2.npz"] and sorted(os.listdir(tmp_path / "two")) == names
    for name in names:
        one, two = np.load(tmp_path / "one" / name), np.load(tmp_path / "two" / name)
        for key in ("logits", "hidden"):
            assert one[key].shape == two[key].shape and one[key].shape[0] == 4, (name, key)
            assert np.array_equal(one[key].view(np.uint32), two[key].view(np.uint32)), (name, key)


def test_ep_arguments_are_checked(checkpoint):
    with pytest.raises(InvalidArgumentError, match="'ep_max_tokens' is required with 'ep_group'"):
        Model(checkpoint, ep_group=object())
    with pytest.raises(ArgumentTypeError, match="argument 'group' must be a tessera.deep_ep.Group"):
        Model(checkpoint, ep_group=object(), ep_max_tokens=8)
    with pytest.raises(NotImplementedInTessera, match="without an expert exchange"):
        Model(checkpoint, ranks=2)
