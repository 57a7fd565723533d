"""DeepGEMM's ``deep_gemm.utils``: math helpers, FP8/FP4 quantisers and scale-factor layout utilities."""
from . import dist, fp4, grouped_layout, layout, math  # noqa: F401 - submodules, as deep_gemm.utils has
from .dist import init_dist, uneven_all_gather
from .fp4 import *  # noqa: F401,F403 - re-exported like deep_gemm.utils
from .grouped_layout import *  # noqa: F401,F403
from .layout import *  # noqa: F401,F403
from .math import *  # noqa: F401,F403

__all__ = layout.__all__ + grouped_layout.__all__ + math.__all__ + fp4.__all__ + ["init_dist", "uneven_all_gather"]
