"""``T.call_extern(dtype, name, *args)``: the CUDA device functions TileLang kernels call by name, for
those that have a CPU counterpart in the tile language; any other name raises NotImplementedInTessera."""
from . import _context as ctx
from ._expr import cast


def _match_any_sync(mask, value):
    from ._warp import match_any_sync

    return match_any_sync(value, mask)


def _float2half_rz(value):
    from ._bits import float2half_rz

    return float2half_rz(value)


_KNOWN = {"__match_any_sync": _match_any_sync, "__float2half_rz": _float2half_rz}


def call_extern(dtype, name, *args):
    fn = _KNOWN.get(str(name))
    if fn is None:
        raise ctx.not_implemented(
            f"T.call_extern('{name}'): calls into CUDA device code have no CPU counterpart (supported: "
            f"{', '.join(sorted(_KNOWN))})")
    return cast(dtype, fn(*args))
