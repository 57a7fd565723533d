"""CPU stand-ins for deep_ep.utils.envs: the process group is gloo over the ranks of the mpirun job
(each mpirun rank runs the test with --num-processes 1, so rank and size come from Open MPI)."""
import os
import random

import torch
import torch.distributed as dist

import tessera.deep_ep as _deep_ep

_local_rank = None
_local_seed = 0
_global_seed = 0


def init_seed(global_seed: int) -> None:
    global _local_seed, _global_seed
    _local_seed = global_seed + dist.get_rank()
    _global_seed = global_seed
    torch.manual_seed(_local_seed)
    random.seed(_local_seed)


def get_local_seed() -> int:
    return _local_seed


def get_global_seed() -> int:
    return _global_seed


def dist_print(s: str = "", once_in_node: bool = False) -> None:
    if not once_in_node or _local_rank == 0:
        print(s, flush=True)
    dist.barrier()


def _gloo_view(t):
    # gloo moves no bfloat16 / float8: the same bytes as integers of the same width.
    if t.dtype == torch.bfloat16:
        return t.view(torch.float16)
    if t.element_size() == 1 and t.is_floating_point():
        return t.view(torch.uint8)
    return t


def _adapt_collectives() -> None:
    """Collectives the suites call with NCCL's conventions, done the way gloo accepts them."""
    all_to_all_single, all_gather_into_tensor = dist.all_to_all_single, dist.all_gather_into_tensor

    def a2a(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
        return all_to_all_single(_gloo_view(output), _gloo_view(input), output_split_sizes, input_split_sizes,
                                 group=group, async_op=async_op)

    def gather_into(output_tensor, input_tensor, group=None, async_op=False):
        out, inp = _gloo_view(output_tensor), _gloo_view(input_tensor)
        if out.dim() == inp.dim() + 1:  # NCCL takes a stacked [R, ...] output; gloo a concatenated one
            out = out.view(-1, *inp.shape[1:]) if inp.dim() > 0 else out.view(-1)
        return all_gather_into_tensor(out, inp, group=group, async_op=async_op)

    dist.all_to_all_single, dist.all_gather_into_tensor = a2a, gather_into


def init_dist(local_rank: int, num_local_ranks: int, seed: int = 0):
    global _local_rank
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", local_rank))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", num_local_ranks))
    _local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", local_rank))
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("MASTER_PORT", "8361"))
    _adapt_collectives()
    dist.init_process_group(backend="gloo", init_method=f"tcp://{addr}:{port}", world_size=size, rank=rank)
    torch.set_default_dtype(torch.bfloat16)
    init_seed(seed)
    return dist.get_rank(), dist.get_world_size(), dist.new_group(list(range(size)))


def get_physical_domain_size(group):
    return _deep_ep.get_physical_domain_size(group)


def get_logical_domain_size(group, allow_hybrid_mode: bool = True):
    return _deep_ep.get_logical_domain_size(group, allow_hybrid_mode)


def check_nvlink_connections(group) -> None:
    return None


def check_torch_deterministic() -> None:
    return None


def get_nvlink_gbs(factor: float = 0.9) -> float:
    return 0.0


def check_fast_rdma_atomic_support(nic_name: str = "") -> bool:
    return False


def get_rdma_gbs(nic_name: str = "") -> float:
    # Used to size sleeps in test_pp; a CPU "link" of ~10 GB/s keeps them short.
    return 10.0
