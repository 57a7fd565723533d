"""FlashMLA names and types for call-compatibility: the flash_mla_interface submodule, __version__, and
FlashMLASchedMeta holding the caller's kind of array (torch tensors for torch input)."""
import ml_dtypes
import numpy as np
import pytest

from tessera import flash_mla

torch = pytest.importorskip("torch")


def test_interface_module_and_version():
    from tessera.flash_mla import flash_mla_interface

    assert flash_mla.__version__ == "1.0.0"
    for name in ("get_mla_metadata", "flash_mla_with_kvcache", "flash_attn_varlen_func", "flash_mla_sparse_fwd",
                 "flash_attn_varlen_qkvpacked_func", "flash_attn_varlen_kvpacked_func", "FlashMLASchedMeta"):
        assert getattr(flash_mla_interface, name) is getattr(flash_mla, name)


def test_sched_meta_holds_torch_tensors_for_torch_input():
    g = torch.Generator().manual_seed(3)
    b, s_q, h_q, d, dv, block = 2, 1, 4, 64, 32, 16
    q = torch.randn((b, s_q, h_q, d), generator=g).bfloat16()
    cache = torch.randn((4, block, 1, d), generator=g).bfloat16()
    table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    lens = torch.tensor([20, 7], dtype=torch.int32)
    meta, none = flash_mla.get_mla_metadata()
    assert none is None and not meta.have_initialized
    out, lse = flash_mla.flash_mla_with_kvcache(q, cache, table, lens, dv, meta)
    assert meta.have_initialized and isinstance(meta.tile_scheduler_metadata, torch.Tensor)
    assert meta.tile_scheduler_metadata.dtype == torch.int32 and meta.tile_scheduler_metadata.shape[1] == 8
    assert isinstance(meta.num_splits, torch.Tensor) and meta.num_splits.dtype == torch.int32
    out2, lse2 = flash_mla.flash_mla_with_kvcache(q, cache, table, lens, dv, meta)  # reuses the recorded split
    assert torch.equal(out, out2) and torch.equal(lse, lse2)
    # float64 reference of request 1 (7 tokens from page 2), head 0
    k = cache[2, :7, 0].double()
    s = (q[1, 0, 0].double() @ k.T) * d ** -0.5
    p = torch.softmax(s, 0)
    assert torch.allclose(out[1, 0, 0].double(), p @ k[:, :dv], atol=2e-2)
    assert abs(lse[1, 0, 0].item() - torch.logsumexp(s, 0).item()) < 1e-3
    np_meta, _ = flash_mla.get_mla_metadata()
    flash_mla.flash_mla_with_kvcache(q.float().numpy().astype(ml_dtypes.bfloat16), cache.float().numpy().astype(
        ml_dtypes.bfloat16), table.numpy(), lens.numpy(), dv, np_meta)
    assert isinstance(np_meta.tile_scheduler_metadata, np.ndarray)
