"""Interleaved medians over rotating operand copies, and the copy count that makes a row read DRAM."""
import math
import statistics
import time


def copies_beyond(bytes_per_call: int, l3_bytes: int, over_l3: float = 4.0) -> int:
    """Copies whose operands together exceed over_l3 x L3, so call i (on copy i % n) finds none of its
    operands in the cache (at least 2)."""
    return max(2, math.ceil(over_l3 * l3_bytes / max(bytes_per_call, 1)) + 1)


# Idle libgomp (torch) and OpenBLAS workers busy-wait for a while before they block, and so may ours: the
# first calls after another library's ran slower while they spun. Each group of calls starts after this
# pause (as in the C++ benches' settle_threads) and one untimed call that wakes the group's threads.
SETTLE_S = 0.02


def interleaved_medians(calls, copies: int, budget_s: float, min_rounds: int = 3, ours_per_round: int = 3,
                        settle_s: float = SETTLE_S):
    """Medians (ms) of each call in ``calls`` (name -> f(copy index)), timed round by round so a shared
    machine slows all alike. The first call is ours and runs ``ours_per_round`` times a round (it is
    the fastest, the peers take most of the budget). One warm-up call of each first; with several calls
    and ``settle_s`` > 0, each name's calls in a round start ``settle_s`` after the previous name's,
    behind one untimed call (on the copy used last, not the next one)."""
    names = list(calls)
    for name in names:
        calls[name](copies - 1)
    times = {name: [] for name in names}
    start, i = time.perf_counter(), 0
    while len(times[names[-1]]) < min_rounds or time.perf_counter() - start < budget_s:
        for name in names:
            if len(names) > 1 and settle_s > 0:
                time.sleep(settle_s)
                calls[name]((i + copies - 1) % copies)
            for _ in range(ours_per_round if name == names[0] else 1):
                t = time.perf_counter()
                calls[name](i % copies)
                times[name].append((time.perf_counter() - t) * 1e3)
                i += 1
        if len(times[names[-1]]) >= 50:
            break
    return {name: statistics.median(v) for name, v in times.items()}
