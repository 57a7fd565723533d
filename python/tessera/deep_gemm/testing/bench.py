"""Wall-clock timers with the signatures of DeepGEMM's ``bench`` and ``bench_kineto``, and its output
suppressors."""
import json
import os
import sys
import time

import numpy as np

from ..._errors import ArgumentTypeError, invalid_argument

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


class empty_suppress:
    """A context manager that does nothing (DeepGEMM's stand-in when output is not suppressed)."""

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return None


class suppress_stdout_stderr:
    """Silences file descriptors 1 and 2 (also output of native code) and sys.stdout/sys.stderr while
    active; both are restored on exit."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self._null = open(os.devnull, "w")
        self._saved_fds = (os.dup(1), os.dup(2))
        self._saved_files = (sys.stdout, sys.stderr)
        os.dup2(self._null.fileno(), 1)
        os.dup2(self._null.fileno(), 2)
        sys.stdout = sys.stderr = self._null
        return self

    def __exit__(self, *_):
        sys.stdout, sys.stderr = self._saved_files
        for fd, saved in zip((1, 2), self._saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        self._null.close()
        return None


def _write_trace(path: str, name: str, spans) -> None:
    """A Chrome trace (the format torch.profiler exports) with one complete event per timed call."""
    events = [{"name": name, "ph": "X", "pid": os.getpid(), "tid": 0, "ts": start * 1e6, "dur": dur * 1e6,
               "cat": "cpu_call"} for start, dur in spans]
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)


def bench_kineto(fn, kernel_names, num_tests: int = 30, suppress_kineto_output: bool = False,
                 trace_path=None, flush_l2: bool = True, with_multiple_kernels: bool = False, barrier=None,
                 barrier_comm_profiling: bool = False):
    """Mean seconds per call of ``fn()`` over ``num_tests`` calls, returned the way DeepGEMM's
    profiler-based ``bench_kineto`` returns kernel times: a float for a name, a tuple for a tuple of names.

    On a CPU there is no kernel trace to search: the whole call of ``fn`` is the one "kernel". With a
    tuple of names, the first name gets the whole call's time and the others 0.0, so sums over the
    names stay the call's time. ``trace_path``: a Chrome trace with one event per timed call is
    written there. ``barrier``: called (untimed) before every timed call, as DeepGEMM does to align
    ranks. ``flush_l2`` writes 128 MiB before every timed call (untimed) so each call starts with cold
    caches. ``suppress_kineto_output`` silences fn's output during the timed calls;
    ``with_multiple_kernels`` and ``barrier_comm_profiling`` have nothing to act on. One untimed call
    runs first.
    """
    fn_name = "bench_kineto"
    if isinstance(kernel_names, str):
        names = None
    elif isinstance(kernel_names, (tuple, list)) and kernel_names and all(isinstance(n, str) for n in kernel_names):
        names = tuple(kernel_names)
    else:
        raise invalid_argument(fn_name, "kernel_names", "must be a string or a non-empty tuple of strings")
    if trace_path is not None and not isinstance(trace_path, (str, os.PathLike)):
        raise ArgumentTypeError(f"{fn_name}: argument 'trace_path' must be a path or None, got {type(trace_path).__name__}")
    if barrier is not None and not callable(barrier):
        raise ArgumentTypeError(f"{fn_name}: argument 'barrier' must be callable or None, got {type(barrier).__name__}")
    if int(num_tests) < 1:
        raise invalid_argument(fn_name, "num_tests", f"must be >= 1 (got {num_tests})")

    fn()
    flush = np.empty(_FLUSH_BYTES, np.uint8) if flush_l2 else None  # released when the call returns
    spans = []
    with (suppress_stdout_stderr() if suppress_kineto_output else empty_suppress()):
        for _ in range(int(num_tests)):
            if flush is not None:
                flush.fill(1)
            if barrier is not None:
                barrier()
            start = time.perf_counter()
            fn()
            spans.append((start, time.perf_counter() - start))
    if trace_path is not None:
        _write_trace(os.fspath(trace_path), names[0] if names else kernel_names, spans)
    mean = sum(d for _, d in spans) / len(spans)
    return mean if names is None else (mean,) + (0.0,) * (len(names) - 1)
