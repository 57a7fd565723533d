"""CPU stand-ins for deep_ep.utils.testing: wall-clock timing instead of CUDA events and the kineto
profiler."""
import time

import numpy as np


def flush_l2_cache(enabled: bool = True):
    return None


def bench(fn, num_warmups: int = 50, num_tests: int = 50, post_fn=None, flush_l2: bool = True):
    # Counts are capped: the suites call this in tuning loops meant for GPUs.
    for _ in range(min(num_warmups, 2)):
        fn()
    times = []
    for _ in range(max(min(num_tests, 5), 2)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        if post_fn is not None:
            post_fn()
    times = np.array(times[1:])
    return float(np.average(times)), float(np.min(times)), float(np.max(times))


class empty_suppress:
    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False


suppress_stdout_stderr = empty_suppress


def bench_kineto(fn, kernel_names, num_tests: int = 30, suppress_kineto_output: bool = False,
                 trace_path=None, flush_l2: bool = True, barrier_comm_profiling: bool = False,
                 num_kernels_per_period: int = 1, barrier=None, **kwargs):
    """One warm-up call, then the median wall time of a few calls, each started together on every
    rank (``barrier``, else torch.distributed's) so a late peer is not timed. Every kernel name gets
    the whole call's time (a CPU has no kernels to tell apart)."""
    import torch.distributed as dist

    sync = barrier if barrier is not None else (dist.barrier if dist.is_initialized() else (lambda: None))
    fn()
    times = []
    for _ in range(max(1, min(num_tests, 3))):
        sync()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    elapsed = float(np.median(times))
    per_kernel = elapsed if num_kernels_per_period == 1 else [elapsed / num_kernels_per_period] * num_kernels_per_period
    if isinstance(kernel_names, str):
        return per_kernel
    return tuple(per_kernel for _ in kernel_names)
