"""Wall-clock timers with the signatures of DeepGEMM's ``bench`` and ``bench_kineto``."""
import time

import numpy as np

from ..._errors import NotImplementedInTessera, invalid_argument

# Bytes written between bench_kineto's calls when flush_l2 is set: larger than the last-level caches of
# the CPUs tessera targets (32 MiB L3 per CCD here), so every call starts from DRAM like a GPU call
# after DeepGEMM's 256 MB flush.
_FLUSH_BYTES = 128 << 20


def bench(fn, num_warmups: int = 5, num_tests: int = 10, high_precision: bool = False) -> float:
    """Median seconds per call of ``fn()`` over ``num_tests`` timed calls after ``num_warmups``
    untimed ones. ``high_precision`` (a GPU launch-overhead trick) is accepted and ignored. For
    benchmarks that rotate inputs larger than the caches, use tessera's C++ bench tool."""
    for _ in range(num_warmups):
        fn()
    times = []
    for _ in range(max(int(num_tests), 1)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    middle = len(times) // 2
    return times[middle] if len(times) % 2 else 0.5 * (times[middle - 1] + times[middle])


def bench_kineto(fn, kernel_names, num_tests: int = 30, suppress_kineto_output: bool = False,
                 trace_path=None, barrier_comm_profiling: bool = False, flush_l2: bool = True,
                 with_multiple_kernels: bool = False):
    """Mean seconds per call of ``fn()`` over ``num_tests`` calls, returned the way DeepGEMM's
    profiler-based ``bench_kineto`` returns one kernel's time (a float for a name, a 1-tuple for a
    1-tuple of names).

    On a CPU there is no kernel trace to search: the whole call of ``fn`` is the one "kernel" the name
    refers to, so asking for several names' separate times raises ``NotImplementedInTessera``, as does
    ``trace_path`` (no trace is written). ``flush_l2`` writes 128 MiB before every timed call (not
    timed) so each call starts with cold caches; ``suppress_kineto_output``, ``barrier_comm_profiling``
    and ``with_multiple_kernels`` have nothing to act on and are ignored. One untimed call runs first.
    """
    fn_name = "bench_kineto"
    if isinstance(kernel_names, str):
        names = None
    elif isinstance(kernel_names, (tuple, list)) and kernel_names and all(isinstance(n, str) for n in kernel_names):
        names = tuple(kernel_names)
        if len(names) != 1:
            raise NotImplementedInTessera(
                f"{fn_name}: argument 'kernel_names' names {len(names)} kernels; tessera on CPU times "
                "the whole call of fn as one kernel, so only one name can be given")
    else:
        raise invalid_argument(fn_name, "kernel_names", "must be a string or a non-empty tuple/list of strings")
    if trace_path is not None:
        raise NotImplementedInTessera(f"{fn_name}: argument 'trace_path' is not supported (no kernel trace on CPU)")
    if int(num_tests) < 1:
        raise invalid_argument(fn_name, "num_tests", f"must be >= 1 (got {num_tests})")

    fn()
    flush = np.empty(_FLUSH_BYTES, np.uint8) if flush_l2 else None  # released when the call returns
    total = 0.0
    for _ in range(int(num_tests)):
        if flush is not None:
            flush.fill(1)
        start = time.perf_counter()
        fn()
        total += time.perf_counter() - start
    mean = total / int(num_tests)
    return mean if names is None else (mean,)
