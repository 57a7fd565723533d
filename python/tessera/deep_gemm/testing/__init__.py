"""DeepGEMM's ``deep_gemm.testing``: numeric comparisons, wall-clock timers and test decorators."""
from . import bench as _bench_module  # noqa: F401 - keeps the submodule importable by name
from . import numeric, utils
from .bench import bench, bench_kineto, empty_suppress, suppress_stdout_stderr
from .numeric import assert_bitwise_equal, calc_diff, count_bytes
from .utils import get_arch_major, ignore_env, test_filter

__all__ = ["assert_bitwise_equal", "bench", "bench_kineto", "calc_diff", "count_bytes", "empty_suppress",
           "get_arch_major", "ignore_env", "numeric", "suppress_stdout_stderr", "test_filter", "utils"]
