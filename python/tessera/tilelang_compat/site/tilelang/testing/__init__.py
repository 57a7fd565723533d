"""``tilelang.testing``: test helpers. The ``requires_*`` decorators check nothing (kernels run on the
CPU whatever device a test names); ``main()`` runs the calling file's tests with pytest."""
import inspect
import random
import sys

from ..utils.tensor import torch_assert_close  # noqa: F401


def set_random_seed(seed=42):
    """Seeds Python's, numpy's and (when installed) torch's generators."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)


def main():
    """Runs pytest on the file that called it (TileLang test files end with tilelang.testing.main())."""
    import pytest

    caller = inspect.stack()[1].filename
    sys.exit(pytest.main([caller] + sys.argv[1:]))


def _passthrough(func=None, *args, **kwargs):
    if callable(func) and not args and not kwargs:
        return func
    return lambda f: f


requires_cuda = requires_rocm = requires_cdna = requires_gfx950 = requires_cuda_or_cdna = requires_llvm = _passthrough
requires_metal = requires_package = _passthrough


def requires_cuda_compute_version(major_version, minor_version=0, mode="ge"):
    return lambda f: f


requires_cuda_compute_version_ge = requires_cuda_compute_version_gt = requires_cuda_compute_version
requires_cuda_compute_version_eq = requires_cuda_compute_version_lt = requires_cuda_compute_version
requires_cuda_compute_version_le = requires_cuda_compute_version

__all__ = ["main", "requires_cuda", "set_random_seed", "torch_assert_close"]
