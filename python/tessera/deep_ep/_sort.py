"""EPHandle.deterministic_sort: received rows ordered by their source (recv_src_metadata column 0),
for numpy arrays and torch tensors alike."""
import numpy as np

from .._arrays import is_torch_tensor


def _order(keys):
    if is_torch_tensor(keys):
        import torch
        return torch.sort(keys, stable=True).indices
    return np.argsort(keys, kind="stable")


def _permute(array, order) -> None:
    if array is None:
        return
    array[...] = array[order]


def sort_received(handle, do_cpu_sync: bool, is_cached_dispatch: bool, arrays) -> None:
    meta = handle.recv_src_metadata
    if not is_cached_dispatch:
        handle.cached_recv_src_metadata_before_sort = meta.clone() if is_torch_tensor(meta) else meta.copy()
    before = handle.cached_recv_src_metadata_before_sort
    if before is None:
        raise RuntimeError("EPHandle.deterministic_sort: a cached dispatch needs the sort of its first dispatch")
    keys = before[:, 0].clone() if is_torch_tensor(before) else before[:, 0].copy()
    if not do_cpu_sync:  # rows past the received ones stay last
        valid = int(handle.psum_num_recv_tokens_per_scaleup_rank[-1])
        keys[valid:] = np.iinfo(np.int32).max
    order = _order(keys)
    for array in arrays:
        _permute(array, order)
    if not is_cached_dispatch:
        _permute(meta, order)
