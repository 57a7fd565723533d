"""``tessera.deep_ep``: DeepEP's expert-parallel communication (dispatch / combine) between CPU ranks.

Ranks are processes started by ``mpirun``; ranks on one host exchange tokens through POSIX shared
memory (each token is written once, straight into the receiver's slots), ranks on other hosts over
MPI. ``ElasticBuffer`` (DeepEP v2) and ``Buffer`` (v1, with the low-latency pair) keep DeepEP's names,
argument names and defaults; ``group`` is a ``tessera.deep_ep.Group`` (``Group.world()``), an mpi4py
communicator, or a torch.distributed group of an mpirun job. See docs/ep.md.

Types follow the caller: a call given torch CPU tensors returns torch tensors (views of tessera's
memory, not copies), a call given numpy arrays returns numpy arrays; dtype arguments take torch or
numpy dtypes. ``topk_idx_t`` is torch.int64 once the program imported torch, else numpy.int64 (torch
is optional). Deviations from DeepEP, name by name: docs/compat.md.
"""
from . import _dtypes
from ._elastic import ElasticBuffer, EPHandle
from ._event import EventHandle, EventOverlap
from ._group import Group, get_logical_domain_size, get_physical_domain_size
from ._legacy import Buffer, Config, LowLatencyHandle

__all__ = ["Buffer", "Config", "ElasticBuffer", "EPHandle", "EventHandle", "EventOverlap", "Group",
           "LowLatencyHandle", "topk_idx_t", "get_physical_domain_size", "get_logical_domain_size",
           "shm_copy_gbps", "mpi_available"]


def __getattr__(name):
    # topk_idx_t is DeepEP's torch.int64 when the program uses torch (``t.to(deep_ep.topk_idx_t)``),
    # numpy.int64 otherwise; resolved per access because torch may be imported after tessera.
    if name == "topk_idx_t":
        return _dtypes.topk_idx_t()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def shm_copy_gbps(nbytes: int = 0) -> float:
    """Process-to-process shared-memory copy bandwidth of this machine in GB/s (payload bytes one process
    delivers into another's shared memory per second while the other does the same)."""
    from .. import _C
    return _C.ep_measure_shm_copy_gbps(int(nbytes))


def mpi_available() -> bool:
    """Whether this build of tessera has MPI (without it, groups hold exactly one rank)."""
    from .. import _C
    return _C.ep_mpi_available()
