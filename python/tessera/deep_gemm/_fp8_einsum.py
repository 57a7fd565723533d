"""fp8_einsum's SM100 expressions 'bhd,hdr->bhr' and 'bhd,bhr->hdr' (DeepGEMM's layouts and scales).

'bhd,hdr->bhr': a = (e4m3 x [b, h, d], float32 sf [b, h, ceil(d/128)]: per token, 128 along d),
                b = (e4m3 y [h, d, r], float32 sf [h, ceil(d/128), ceil(r/128)]: 128x128 blocks),
                d [b, h, r] bfloat16 or float32; recipe (1, 128, 128) (the default).
'bhd,bhr->hdr': a = (e4m3 x [b, h, d], float32 sf [ceil(b/128), h, d]: per channel, 128 along b),
                b = (e4m3 y [b, h, r], float32 sf [ceil(b/128), h, r]), d [h, d, r] float32;
                recipe must be (1, 1, 128) (the weight-gradient recipe).
With c, d = c + a.b (c may be d). Operands are dequantized exactly (e4m3 times a power-of-two or
float32 scale), multiplied and summed in float64, and rounded once to d's dtype.
"""
import ml_dtypes
import numpy as np

from .._arrays import shares_own_memory, to_numpy
from .._errors import ArgumentTypeError, InvalidArgumentError, invalid_argument

_E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_F32 = np.dtype(np.float32)
_FN = "fp8_einsum"


def _cdiv(x, y):
    return (x + y - 1) // y


def _arr(arg, x, ndim, dtypes, writable=False):
    try:
        v = to_numpy(x)
    except TypeError:
        raise ArgumentTypeError(f"{_FN}: argument '{arg}' must be a numpy array or a torch CPU tensor, "
                        f"got {type(x).__name__}") from None
    if v.ndim != ndim:
        raise invalid_argument(_FN, arg, f"must be {ndim}-D, got shape {list(v.shape)}")
    if v.dtype not in dtypes:
        raise invalid_argument(_FN, arg, f"must have dtype {' or '.join(map(str, dtypes))}, got {v.dtype}")
    if writable and not v.flags.writeable:
        raise invalid_argument(_FN, arg, "is an output and must be writable")
    if writable and shares_own_memory(v):
        raise invalid_argument(_FN, arg, f"is an output whose elements share memory (shape {list(v.shape)}, "
                               f"strides {list(v.strides)}); pass a view without repeated or interleaved elements")
    return v


def _shape(arg, v, want):
    if tuple(v.shape) != tuple(want):
        raise invalid_argument(_FN, arg, f"must have shape {list(want)}, got {list(v.shape)}")


def _expand(sf, axis, size, gran=128):
    """Scale factors repeated gran times along axis and cut to size."""
    return np.repeat(sf, gran, axis=axis).take(np.arange(size), axis=axis)


def _finish(d_arr, c, result):
    if c is not None:
        cv = _arr("c", c, 3, (d_arr.dtype,))
        _shape("c", cv, d_arr.shape)
        result = result + cv.astype(np.float64)
    d_arr[...] = result.astype(d_arr.dtype)


def fp8_einsum_bhd_hdr_bhr(a, b, d, c, recipe) -> None:
    if recipe not in (None, (1, 128, 128)):
        raise invalid_argument(_FN, "recipe", f"must be (1, 128, 128) for 'bhd,hdr->bhr', got {recipe}")
    x = _arr("a", a[0], 3, (_E4M3,))
    bsz, heads, dd = x.shape
    sx = _arr("a.scale", a[1], 3, (_F32,))
    _shape("a.scale", sx, (bsz, heads, _cdiv(dd, 128)))
    y = _arr("b", b[0], 3, (_E4M3,))
    r = y.shape[2]
    _shape("b", y, (heads, dd, r))
    sy = _arr("b.scale", b[1], 3, (_F32,))
    _shape("b.scale", sy, (heads, _cdiv(dd, 128), _cdiv(r, 128)))
    z = _arr("d", d, 3, (_BF16, _F32), writable=True)
    _shape("d", z, (bsz, heads, r))
    xd = x.astype(np.float64) * _expand(sx, 2, dd)                              # [b, h, d]
    yd = y.astype(np.float64) * _expand(_expand(sy, 1, dd), 2, r)               # [h, d, r]
    out = np.moveaxis(np.moveaxis(xd, 1, 0) @ yd, 0, 1)                         # [b, h, r]
    _finish(z, c, out)


def fp8_einsum_bhd_bhr_hdr(a, b, d, c, recipe) -> None:
    if recipe != (1, 1, 128):
        raise invalid_argument(_FN, "recipe", f"must be (1, 1, 128) for 'bhd,bhr->hdr' (scales per 128 tokens "
                               f"of b), got {recipe}")
    x = _arr("a", a[0], 3, (_E4M3,))
    bsz, heads, dd = x.shape
    sx = _arr("a.scale", a[1], 3, (_F32,))
    _shape("a.scale", sx, (_cdiv(bsz, 128), heads, dd))
    y = _arr("b", b[0], 3, (_E4M3,))
    r = y.shape[2]
    _shape("b", y, (bsz, heads, r))
    sy = _arr("b.scale", b[1], 3, (_F32,))
    _shape("b.scale", sy, (_cdiv(bsz, 128), heads, r))
    z = _arr("d", d, 3, (_F32,), writable=True)
    _shape("d", z, (heads, dd, r))
    if c is None and np.shares_memory(z, x):
        raise InvalidArgumentError(f"{_FN}: argument 'd' must not overlap 'a'")
    xd = x.astype(np.float64) * _expand(sx, 0, bsz)                             # [b, h, d]
    yd = y.astype(np.float64) * _expand(sy, 0, bsz)                             # [b, h, r]
    out = np.swapaxes(np.moveaxis(xd, 1, 0), 1, 2) @ np.moveaxis(yd, 1, 0)      # [h, d, r]
    _finish(z, c, out)
