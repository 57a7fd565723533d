"""DeepGEMM's ``deep_gemm.utils.dist``: process-group setup and an all-gather of unequal sizes.

The process group uses torch.distributed's ``gloo`` backend (CPU tensors) where DeepGEMM uses NCCL;
the rendezvous is the same (MASTER_ADDR, MASTER_PORT, WORLD_SIZE = number of nodes, RANK = node rank).
torch is imported on first use only: ``import tessera`` never needs it.
"""
import os

_local_rank = None


def _torch_dist():
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:  # the rest of tessera works without torch; these helpers cannot
        raise ImportError("deep_gemm.utils.dist needs torch (torch.distributed)") from e
    return torch, dist


def init_dist(local_rank: int, num_local_ranks: int):
    """Joins the job as global rank ``node_rank * num_local_ranks + local_rank`` and returns
    ``(rank, world_size, group)`` with ``group`` spanning every rank."""
    torch, dist = _torch_dist()
    global _local_rank
    ip = os.getenv("MASTER_ADDR", "127.0.0.1")
    port = int(os.getenv("MASTER_PORT", "8361"))
    num_nodes = int(os.getenv("WORLD_SIZE", 1))
    node_rank = int(os.getenv("RANK", 0))
    _local_rank = local_rank
    dist.init_process_group(backend="gloo", init_method=f"tcp://{ip}:{port}",
                            world_size=num_nodes * num_local_ranks, rank=node_rank * num_local_ranks + local_rank)
    return dist.get_rank(), dist.get_world_size(), dist.new_group(list(range(num_local_ranks * num_nodes)))


def uneven_all_gather(tensor, dim: int = 0, group=None):
    """Concatenation along ``dim`` of every rank's ``tensor`` in rank order; the ranks' sizes along
    ``dim`` may differ (the other dimensions must agree)."""
    torch, dist = _torch_dist()
    world = dist.get_world_size(group)
    size = torch.tensor([tensor.shape[dim]], dtype=torch.long, device=tensor.device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    sizes = [int(s.item()) for s in sizes]
    longest = max(sizes)
    if tensor.shape[dim] < longest:  # all_gather needs equal shapes: pad, then cut each part back
        pad_shape = list(tensor.shape)
        pad_shape[dim] = longest - tensor.shape[dim]
        tensor = torch.cat([tensor, torch.zeros(pad_shape, dtype=tensor.dtype, device=tensor.device)], dim=dim)
    else:
        tensor = tensor.contiguous()
    parts = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(parts, tensor, group=group)
    return torch.cat([torch.narrow(p, dim, 0, n) for p, n in zip(parts, sizes)], dim=dim)


def dist_print(s: str = "", once_in_node: bool = False) -> None:
    """Prints ``s`` (on local rank 0 only with ``once_in_node``), then waits for every rank."""
    _, dist = _torch_dist()
    if _local_rank is None:
        raise RuntimeError("dist_print: init_dist must be called first")
    if not once_in_node or _local_rank == 0:
        print(s, flush=True)
    dist.barrier()


__all__ = ["init_dist", "uneven_all_gather", "dist_print"]
