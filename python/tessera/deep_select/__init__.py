"""``tessera.deep_select``: DeepSelect's top-k on the CPU (``from tessera import deep_select``).

``topk`` and ``get_stride_requirement`` keep DeepSelect's signatures, defaults, return convention and
argument checks (``interface``); the work is done by ``deep_select_cuda``, tessera's CPU backend under
the name of DeepSelect's backend module (see include/tessera/select.h for the native contract). Inputs
are numpy arrays (``ml_dtypes.bfloat16`` / ``float32``) or torch CPU tensors; outputs are the same
kind of array, and ``indices_type`` defaults to int64 of that kind.

Choices tessera makes where DeepSelect is silent or backend-specific:

- The selected set is the first ``topk`` elements of a total order: larger value first, ``-0.0`` just
  below ``+0.0``, equal values by lower index. It is therefore unique and identical on every run,
  thread count and instruction set.
- ``sorted=False``: the order is unspecified (tessera happens to return ascending indices);
  ``sorted=True`` orders by that total order and also works for bfloat16 input (DeepSelect's CUDA
  backend allows it for float32 only). ``sorted`` with ``sorted_index``, or ``sorted`` with
  ``return_value=False``, is an error, as in DeepSelect.
- ``begin`` and ``hint`` are rejected by ``topk`` as in DeepSelect; the backend's ``topk`` implements
  ``begin`` (row range ``[begin[i], end[i])``, indices stay absolute column positions).
- NaN in a row longer than ``topk``: with ``abort_when_nan_found=True`` the rows without NaN are
  written and an ``InvalidArgumentError`` names the first NaN row (DeepSelect traps the kernel);
  otherwise every index of that row becomes ``0x3F3F3F3F`` and every value NaN (DeepSelect's CUDA
  backend sets only index 0). Rows no longer than ``topk`` are never checked.
- Memory rules checked as DeepSelect does: 16-byte aligned input and output_idx, input storage covering
  the final row's full stride, non-overlapping output rows. Row strides themselves need no alignment
  (DeepSelect wants multiples of ``get_stride_requirement()``, (1024, 32) bytes).
"""
from . import deep_select_cuda, interface
from .interface import get_stride_requirement, topk

__all__ = ["topk", "get_stride_requirement", "interface", "deep_select_cuda"]
