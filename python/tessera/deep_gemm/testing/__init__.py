"""DeepGEMM's ``deep_gemm.testing``: numeric comparisons and a simple timer."""
from .bench import bench
from .numeric import assert_bitwise_equal, calc_diff, count_bytes

__all__ = ["assert_bitwise_equal", "bench", "calc_diff", "count_bytes"]
