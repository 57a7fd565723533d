#!/usr/bin/env python3
"""Runs TileLang's own examples on tessera through the ``tilelang`` alias.

usage: run_tilelang_examples.py CHECKOUT [--only NAME] [--timeout S] [--lock F] [--json OUT]

CHECKOUT is a TileLang source tree (its example files are run where they are, never copied here).
Each example (tilelang_examples.py) runs in its own process: tessera's alias folder first on
PYTHONPATH (``import tilelang`` -> tessera), ``cuda`` tensors mapped to the CPU (shim/cpu_cuda.py).
An example passes when it exits 0 (its assertions ran and held), or when it printed its ``pass_if``
line before failing in a part that is not a check. Prints PASS / FAIL per example with its wall
time (including any wait for --lock) and last error line; exits 1 if any failed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tilelang_examples import EXAMPLES  # noqa: E402


def alias_path():
    out = subprocess.run([sys.executable, "-m", "tessera.tilelang_compat", "--path"], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def last_error(log_text):
    lines = [l for l in log_text.strip().splitlines() if l.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line or line.startswith("AssertionError"):
            return line.strip()[:300]
    return lines[-1].strip()[:300] if lines else ""


def run_example(checkout, name, spec, timeout, lock, logdir, alias):
    script = os.path.join(checkout, spec["path"])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([alias] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(spec.get("env", {}))
    cmd = [sys.executable, os.path.join(HERE, "shim", "run_script.py"), script] + spec.get("argv", [])
    if lock:  # shared machines: hold the CPU lock per example, not for the whole run
        cmd = ["flock", lock] + cmd
    log = os.path.join(logdir, name + ".log")
    start = time.time()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    with open(log) as f:
        text = f.read()
    passed = rc == 0 or (spec.get("pass_if") is not None and spec["pass_if"] in text)
    return {"name": name, "path": spec["path"], "rc": rc, "passed": passed, "seconds": round(time.time() - start, 1),
            "log": log, "error": "" if rc == 0 else last_error(text) if rc != "timeout" else f"timeout after {timeout} s"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", help="a TileLang source tree")
    ap.add_argument("--only", action="append", default=[], help="run only examples whose name contains this")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per example")
    ap.add_argument("--lock", help="run each example under `flock LOCK` (e.g. /tmp/tessera-cpu.lock)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    checkout = os.path.abspath(args.checkout)
    if not os.path.isdir(os.path.join(checkout, "examples")):
        raise SystemExit(f"{checkout}: no examples/ folder; pass a TileLang source tree")
    logdir = tempfile.mkdtemp(prefix="tessera-tilelang-examples-")
    alias = alias_path()
    results = []
    for name, spec in EXAMPLES.items():
        if args.only and not any(o in name for o in args.only):
            continue
        if not os.path.exists(os.path.join(checkout, spec["path"])):
            print(f"MISSING {name}: {spec['path']}", flush=True)
            results.append({"name": name, "passed": False, "error": "missing"})
            continue
        r = run_example(checkout, name, spec, args.timeout, args.lock, logdir, alias)
        results.append(r)
        note = "" if r["rc"] == 0 else f"  ({r['error']})"
        print(f"{'PASS' if r['passed'] else 'FAIL'} {name} [{r['seconds']} s]{note}", flush=True)
    n_pass = sum(r["passed"] for r in results)
    print(f"{n_pass} of {len(results)} passed; logs: {logdir}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    sys.exit(0 if n_pass == len(results) else 1)


if __name__ == "__main__":
    main()
