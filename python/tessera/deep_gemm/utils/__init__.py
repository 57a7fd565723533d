"""DeepGEMM's ``deep_gemm.utils``: math helpers, FP8 quantisers and scale-factor layout utilities."""
from . import layout, math
from .layout import *  # noqa: F401,F403 - re-exported like deep_gemm.utils
from .math import *  # noqa: F401,F403

__all__ = layout.__all__ + math.__all__
