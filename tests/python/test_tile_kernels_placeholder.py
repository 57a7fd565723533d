"""tessera.tile_kernels is not implemented: importing works, using any function raises a clear error."""
import inspect

import pytest

import tessera
from tessera import tile_kernels


def test_any_function_raises_not_implemented_naming_it():
    with pytest.raises(tessera.NotImplementedInTessera, match=r"tessera\.tile_kernels\.topk_gate: TileKernels"):
        tile_kernels.topk_gate
    with pytest.raises(NotImplementedError, match=r"tile_kernels\.per_token_cast"):
        from tessera.tile_kernels import per_token_cast  # noqa: F401


def test_dunder_lookups_keep_python_semantics():
    assert not hasattr(tile_kernels, "__wrapped__")
    assert getattr(tile_kernels, "__missing_dunder__", None) is None
    assert inspect.ismodule(tile_kernels) and [n for n, _ in inspect.getmembers(tile_kernels) if not n.startswith("_")] == []
    assert tile_kernels.__all__ == []
