"""``tilelang.contrib``: compiler helpers of the GPU back ends (nvcc queries answer for no GPU)."""
from . import nvcc  # noqa: F401
