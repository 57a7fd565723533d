"""Process groups for ``tessera.deep_ep``: tessera's own MPI-backed ``Group``, an mpi4py communicator,
or a torch.distributed group of a job started by mpirun.

Nodes (scale-up domains sharing memory) come from MPI_Comm_split_type(SHARED). ``ranks_per_node``
(or the environment variable TESSERA_EP_RANKS_PER_NODE) splits each host's ranks, in rank order, into
pretend nodes of that many ranks, so the inter-node (MPI) paths run on one machine.
"""
import os
import sys

from .. import _C
from .._errors import ArgumentTypeError


class Group:
    """An MPI communicator and its node topology. ``Group.world()`` is every rank of the job."""

    def __init__(self, native):
        self._native = native

    @staticmethod
    def world(ranks_per_node=None) -> "Group":
        """All ranks (MPI_COMM_WORLD); initialises MPI if nothing did."""
        return Group(_C.EpGroup.world(_rpn(ranks_per_node)))

    @staticmethod
    def from_mpi4py(comm, ranks_per_node=None) -> "Group":
        """The ranks of an mpi4py communicator (duplicated; collective over it)."""
        return Group(_C.EpGroup.from_fortran_handle(int(comm.py2f()), _rpn(ranks_per_node)))

    @staticmethod
    def from_world_ranks(ranks, ranks_per_node=None) -> "Group":
        """The sub-group of MPI_COMM_WORLD made of these world ranks (collective over them)."""
        return Group(_C.EpGroup.from_world_ranks([int(r) for r in ranks], _rpn(ranks_per_node)))

    def rank(self) -> int:
        return self._native.rank()

    def size(self) -> int:
        return self._native.size()

    def barrier(self, timeout_s: float = 300.0) -> None:
        self._native.barrier(float(timeout_s))

    def topology(self) -> dict:
        """rank, num_ranks, node, num_nodes, local_rank, num_local_ranks, num_hosts, node_of,
        ranks_per_node and a one-line description."""
        return self._native.topology()

    def __repr__(self) -> str:
        return f"tessera.deep_ep.Group({self.topology()['description']}, rank {self.rank()})"


def _rpn(ranks_per_node) -> int:
    if ranks_per_node is None:
        return -1
    if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int) or ranks_per_node < 0:
        raise ValueError(f"tessera.deep_ep.Group: argument 'ranks_per_node' must be an int >= 0 or None, "
                         f"got {ranks_per_node!r}")
    return ranks_per_node


def _is_torch_group(group) -> bool:
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "distributed"):
        return False
    pg = getattr(torch.distributed, "ProcessGroup", None)
    return pg is not None and isinstance(group, pg)


def _from_torch(group) -> Group:
    dist = sys.modules["torch"].distributed
    ranks = dist.get_process_group_ranks(group)
    world_rank = os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK")
    if world_rank is None or int(world_rank) != dist.get_rank():
        raise ValueError("tessera.deep_ep: a torch.distributed group works only in a job started by mpirun whose "
                         "torch ranks equal the MPI world ranks (torch rank "
                         f"{dist.get_rank()}, MPI world rank {world_rank}); pass tessera.deep_ep.Group.world() instead")
    return Group.from_world_ranks(ranks)


def resolve(group, comm=None, fn: str = "tessera.deep_ep") -> Group:
    """The tessera Group behind a ``group`` argument (or an mpi4py ``comm`` when group is None)."""
    if group is None and comm is not None:
        group = comm
    if isinstance(group, Group):
        return group
    if hasattr(group, "py2f") and hasattr(group, "Get_rank"):
        return Group.from_mpi4py(group)
    if _is_torch_group(group):
        return _from_torch(group)
    if group is None:
        raise ValueError(f"{fn}: give a group (tessera.deep_ep.Group.world(), an mpi4py communicator or a "
                         "torch.distributed group) or comm=")
    raise ArgumentTypeError(f"{fn}: argument 'group' must be a tessera.deep_ep.Group, an mpi4py communicator or a "
                    f"torch.distributed ProcessGroup, got {type(group).__name__}")


def get_physical_domain_size(group) -> tuple:
    """DeepEP's (RDMA ranks, NVLink ranks) of ``group``: here (nodes, ranks per node). Collective when
    ``group`` is a torch or mpi4py group (it is turned into a tessera Group)."""
    topo = resolve(group, fn="get_physical_domain_size").topology()
    return topo["num_nodes"], topo["num_ranks"] // topo["num_nodes"]


def get_logical_domain_size(group, allow_hybrid_mode: bool = True) -> tuple:
    """DeepEP's (scale-out ranks, scale-up ranks): (nodes, ranks per node) with hybrid mode, else
    (all ranks, 1) on several nodes. Collective like get_physical_domain_size."""
    topo = resolve(group, fn="get_logical_domain_size").topology()
    if allow_hybrid_mode:
        return topo["num_nodes"], topo["num_ranks"] // topo["num_nodes"]
    return (topo["num_ranks"], 1) if topo["num_nodes"] > 1 else (1, topo["num_ranks"])
