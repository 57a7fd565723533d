"""A simple wall-clock timer with DeepGEMM's ``bench`` signature."""
import time


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
