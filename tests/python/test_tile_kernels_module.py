"""tessera.tile_kernels as a package: submodules import like TileKernels' (``from tile_kernels.quant import
...``), and the parts not implemented raise NotImplementedInTessera naming the function."""
import inspect

import pytest

import tessera
from tessera import tile_kernels


def test_submodules_import_like_tilekernels():
    from tessera.tile_kernels.moe import topk_gate  # noqa: F401
    from tessera.tile_kernels.quant import per_token_cast  # noqa: F401
    assert inspect.ismodule(tile_kernels.quant) and inspect.ismodule(tile_kernels.moe)


def test_missing_parts_raise_not_implemented_naming_them():
    with pytest.raises(tessera.NotImplementedInTessera, match=r"tessera\.tile_kernels\.mhc"):
        tile_kernels.mhc
    assert inspect.ismodule(tile_kernels.modeling.mhc)
    try:
        import torch  # noqa: F401 - the Engram wrapper is a torch.autograd.Function
    except ImportError:
        with pytest.raises(ImportError, match="modeling.engram needs torch"):
            tile_kernels.modeling.engram
    else:
        assert inspect.ismodule(tile_kernels.modeling.engram)


def test_dunder_and_private_lookups_keep_python_semantics():
    assert not hasattr(tile_kernels, "__wrapped__")
    assert getattr(tile_kernels, "__missing_dunder__", None) is None
    assert getattr(tile_kernels, "_missing_private", None) is None
    assert tile_kernels.__all__ == ["quant", "moe", "transpose", "engram", "modeling"]
