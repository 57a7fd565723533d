"""``tilelang.autotuner``: the ``@autotune`` decorator (tessera.tl.autotune)."""
from tessera.tl.autotuner import autotune  # noqa: F401

from ..language._unsupported import unsupported

AutoTuner = unsupported("AutoTuner")  # the builder API; use the @autotune decorator

__all__ = ["autotune", "AutoTuner"]
