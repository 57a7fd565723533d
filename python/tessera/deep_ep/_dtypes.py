"""DeepSeek's dtype arguments: torch dtypes, numpy dtypes, ml_dtypes types or their names."""
import sys

import numpy as np
from .._errors import ArgumentTypeError


def itemsize(dtype, fn: str, arg: str = "dtype") -> int:
    """Bytes per element of ``dtype`` (a torch dtype has ``itemsize``; anything numpy understands works)."""
    size = getattr(dtype, "itemsize", None)
    if isinstance(size, int) and not isinstance(dtype, np.dtype):
        return size
    try:
        return np.dtype(dtype).itemsize
    except TypeError as e:
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a torch or numpy dtype, got {dtype!r}") from e


def is_torch_dtype(dtype) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(dtype, torch.dtype)


def topk_idx_t():
    """DeepEP's topk_idx dtype: torch.int64 once the program imported torch, else numpy.int64."""
    torch = sys.modules.get("torch")
    return torch.int64 if torch is not None else np.int64
