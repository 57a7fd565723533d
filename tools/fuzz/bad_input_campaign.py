#!/usr/bin/env python3
"""Bad-input campaign: every mutation (mutations.py) of every argument of a valid call to each public
entry (entries.py), run in a worker process with a per-case timeout; a crashed worker is replaced.

usage: bad_input_campaign.py [--quick] [--timeout S] [--only NAME] [--json OUT]

Outcomes per case:
  rejected  tessera's named error (TesseraError: InvalidArgumentError, ArgumentTypeError,
            NotImplementedInTessera), outputs untouched                              - fine
  accepted  the call ran (a mutation may still be a valid call)                       - fine
  FAIL: wrote    named error, but an output no longer holds the sentinel
  FAIL: unnamed  any other exception (TypeError, ValueError, MemoryError, ... from inside)
  FAIL: timeout  no answer within the timeout (a size that should have been refused)
  FAIL: crash    the worker process died (signal or abort)
--quick runs every fourth case (CI); the full campaign runs on demand. Exit status 1 on any FAIL.
"""
import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def all_cases(only=None):
    """(entry index, argument, mutation index, label) in a fixed order."""
    from entries import entries
    from mutations import mutations
    cases = []
    for ei, e in enumerate(entries()):
        if only and only not in e.name:
            continue
        for arg, value in e.build().items():
            for mi, (label, _) in enumerate(mutations(value)):
                cases.append((ei, arg, mi, f"{e.name}: {arg} {label}"))
    return cases


# ---- worker: runs cases read from stdin, one JSON line out per case ----

class _Timeout(Exception):
    pass


def _run_case(ei, arg, mi, timeout_s):
    import numpy as np
    import tessera
    from entries import entries
    from mutations import mutations
    e = entries()[ei]
    kwargs = e.build()
    kwargs[arg] = mutations(kwargs[arg])[mi][1](kwargs[arg])
    # Outputs to watch: arrays of at most 2^22 elements (a mutated stride-0 view of 2^31 is not copied).
    outputs = [kwargs[o] for o in e.outputs
               if isinstance(kwargs.get(o), np.ndarray) and 0 < kwargs[o].size <= 1 << 22]
    before = [o.astype(np.float32).copy() for o in outputs]

    def alarm(*_):
        raise _Timeout()

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(timeout_s)
    try:
        e.call(kwargs)
        return "accepted", ""
    except tessera.TesseraError as err:
        for o, b in zip(outputs, before):
            now = o.astype(np.float32)
            if not np.array_equal(np.isnan(now), np.isnan(b)) or not np.array_equal(now[~np.isnan(now)], b[~np.isnan(b)]):
                return "FAIL: wrote", str(err)[:200]
        return "rejected", str(err)[:200]
    except _Timeout:
        return "FAIL: timeout", f"no answer within {timeout_s} s"
    except BaseException as err:  # noqa: B902 - every other exception is the finding
        return "FAIL: unnamed", f"{type(err).__name__}: {str(err)[:160]} @ {traceback.extract_tb(err.__traceback__)[-1].name}"
    finally:
        signal.alarm(0)


def worker(timeout_s):
    for line in sys.stdin:
        ei, arg, mi = json.loads(line)
        outcome, detail = _run_case(ei, arg, mi, timeout_s)
        print(json.dumps([outcome, detail]), flush=True)


# ---- parent ----

class Worker:
    def __init__(self, timeout_s):
        self.timeout_s = timeout_s
        self.p = subprocess.Popen([sys.executable, __file__, "--worker", "--timeout", str(timeout_s)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, bufsize=1)

    def run(self, ei, arg, mi):
        """The case's [outcome, detail]. The worker's own alarm cannot interrupt native code, so a
        case that does not answer within timeout + 10 s kills the worker (a new one takes over)."""
        self.p.stdin.write(json.dumps([ei, arg, mi]) + "\n")
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], self.timeout_s + 10)
        if not ready:
            self.kill()
            return ["FAIL: timeout", f"no answer within {self.timeout_s + 10} s (stuck in native code)"]
        line = self.p.stdout.readline()
        if not line:
            return ["FAIL: crash", f"worker exited with status {self.p.wait()}"]
        return json.loads(line)

    def kill(self):
        self.p.kill()
        self.p.wait()

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=30)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="every fourth case (the CI subset)")
    ap.add_argument("--timeout", type=int, default=20, help="seconds per case (default 20)")
    ap.add_argument("--only", help="entries whose name contains this")
    ap.add_argument("--json", help="write every case's outcome here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.worker:
        worker(opts.timeout)
        return 0
    cases = all_cases(opts.only)
    if opts.quick:
        cases = cases[::4]
    start = time.time()
    results, counts = [], {}
    w = Worker(opts.timeout)
    for n, (ei, arg, mi, label) in enumerate(cases):
        outcome, detail = w.run(ei, arg, mi)
        if outcome in ("FAIL: crash", "FAIL: timeout"):
            if w.p.poll() is None:
                w.kill()
            w = Worker(opts.timeout)
        counts[outcome] = counts.get(outcome, 0) + 1
        results.append({"case": label, "outcome": outcome, "detail": detail})
        if outcome.startswith("FAIL"):
            print(f"{outcome:14} {label}: {detail}", flush=True)
        if (n + 1) % 100 == 0:
            print(f"[campaign] {n + 1}/{len(cases)} cases, {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    w.close()
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"bad-input campaign: {len(cases)} cases in {time.time() - start:.0f} s: {summary}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if any(k.startswith("FAIL") for k in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
