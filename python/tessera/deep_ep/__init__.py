"""``tessera.deep_ep``: DeepEP's expert-parallel communication (dispatch / combine) between CPU ranks.

Ranks are processes started by ``mpirun``; ranks on one host exchange tokens through POSIX shared
memory (each token is written once, straight into the receiver's slots), ranks on other hosts over
MPI. ``ElasticBuffer`` (DeepEP v2) and ``Buffer`` (v1, with the low-latency pair) keep DeepEP's names,
argument names and defaults; ``group`` is a ``tessera.deep_ep.Group`` (``Group.world()``), an mpi4py
communicator, or a torch.distributed group of an mpirun job. See docs/ep.md.
"""
import numpy as np

from ._elastic import ElasticBuffer, EPHandle
from ._event import EventHandle, EventOverlap
from ._group import Group
from ._legacy import Buffer, Config, LowLatencyHandle

# DeepEP's dtype for topk_idx.
topk_idx_t = np.int64

__all__ = ["Buffer", "Config", "ElasticBuffer", "EPHandle", "EventHandle", "EventOverlap", "Group",
           "LowLatencyHandle", "topk_idx_t", "shm_copy_gbps", "mpi_available"]


def shm_copy_gbps(nbytes: int = 0) -> float:
    """Process-to-process shared-memory copy bandwidth of this machine in GB/s (payload bytes one process
    delivers into another's shared memory per second while the other does the same)."""
    from .. import _C
    return _C.ep_measure_shm_copy_gbps(int(nbytes))


def mpi_available() -> bool:
    """Whether this build of tessera has MPI (without it, groups hold exactly one rank)."""
    from .. import _C
    return _C.ep_mpi_available()
