"""``tessera.tile_kernels``: the place of TileKernels (quantisation casts, MoE routing, mHC, Engram).

Not implemented in this build. The module imports, so code written against TileKernels fails at the
first function it uses with ``tessera.NotImplementedInTessera`` naming that function, instead of an
``ImportError`` that looks like a broken install. The README's "Not implemented" list says the same.

What exists elsewhere in tessera for the same jobs: per-token / per-block / per-channel FP8 and FP4
casts in ``tessera.deep_gemm.utils`` (DeepGEMM's casts), top-k selection in ``tessera.deep_select``, and
MoE token layouts in ``tessera.deep_ep`` (dispatch with expand layouts and aligned per-expert counts).
"""
from .._errors import NotImplementedInTessera as _NotImplementedInTessera

__all__: list = []


def __getattr__(name: str):
    # Dunder lookups (copy, pickle, inspect, pytest collection) keep Python's AttributeError contract.
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    raise _NotImplementedInTessera(
        f"tessera.tile_kernels.{name}: TileKernels (quantisation, MoE routing, mHC, Engram) is not "
        "implemented in tessera yet; see the README's 'Not implemented' list")
