"""DeepGEMM's ``deep_gemm.testing``: numeric comparisons and wall-clock timers."""
from .bench import bench, bench_kineto
from .numeric import assert_bitwise_equal, calc_diff, count_bytes

__all__ = ["assert_bitwise_equal", "bench", "bench_kineto", "calc_diff", "count_bytes"]
