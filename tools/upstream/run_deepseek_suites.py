#!/usr/bin/env python3
"""Reruns DeepSeek's own test suites (DeepGEMM, FlashMLA, DeepSelect) against tessera.

usage: run_deepseek_suites.py CHECKOUT [CHECKOUT ...] [--only NAME] [--timeout S] [--json OUT] [--lock F]

CHECKOUT is an upstream source tree (its test files are read from there, never copied here). Each
test file runs in its own process with the shim in tools/upstream/shim/ on the path: the package
alias (deep_gemm -> tessera.deep_gemm, ...), the cuda -> cpu mapping for torch tensors, profiler
stubs, and shapes shrunk per deepseek_suites.py. Prints, per file, the checks and cases that passed, failed,
errored or were not sampled; exits 1 if anything failed.
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
from deepseek_suites import SUITES  # noqa: E402


def detect(checkout: str) -> str:
    for name, suite in SUITES.items():
        if os.path.exists(os.path.join(checkout, suite["detect"])):
            return name
    raise SystemExit(f"{checkout}: not a DeepGEMM, FlashMLA or DeepSelect checkout")


def run_file(checkout, rel, cfg, timeout, tmp, lock=None):
    path = os.path.join(checkout, rel)
    out = os.path.join(tmp, rel.replace("/", "_") + ".json")
    cfg_path = out + ".cfg"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = out + ".log"
    start = time.time()
    with open(log, "w") as logf:
        try:
            cmd = [sys.executable, os.path.join(HERE, "shim", "drive.py"), path, out, cfg_path]
            if lock:  # shared machines: hold the CPU lock per file, not for the whole run
                cmd = ["flock", lock] + cmd
            proc = subprocess.run(cmd,
                                  cwd=os.path.dirname(path), env=env, stdout=logf, stderr=subprocess.STDOUT,
                                  timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    result = {"rc": rc, "seconds": round(time.time() - start, 1), "log": log}
    if os.path.exists(out):
        with open(out) as f:
            result.update(json.load(f))
    return result


def summarize(rel, r):
    """(verdict, one line) for a file's result."""
    if "statements" not in r:
        return "FAIL", f"no result (rc={r['rc']}), see {r['log']}"
    bad = r["checks_failed"] + sum(s["status"] not in ("ok",) for s in r["statements"])
    parts = [f"checks {r['checks_passed']} ok / {r['checks_failed']} failed"]
    for name, c in r["cases"].items():
        parts.append(f"{name}: {c['passed']} passed, {c['failed']} failed, {c['errors']} errors, "
                     f"{c['not_sampled']} not sampled" + (f", {c['overridden']} fwd-only" if c["overridden"] else ""))
        bad += c["failed"] + c["errors"]
    if r.get("unittest"):
        u = r["unittest"]
        parts.append(f"unittest: {u['run']} run, {u['failures']} failed, {u['errors']} errors, {u['skipped']} skipped")
        bad += u["failures"] + u["errors"]
    if r["rc"] not in (0,):
        parts.append(f"rc={r['rc']}")
        bad += r["rc"] == "timeout"
    return ("PASS" if bad == 0 else "FAIL"), "; ".join(parts) + f" ({r['seconds']} s)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkouts", nargs="+")
    ap.add_argument("--only", action="append", default=[], help="run only files whose path contains this")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per file")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--lock", help="run each file under `flock LOCK` (e.g. /tmp/tessera-cpu.lock)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tessera-upstream-")
    everything, failed = {}, False
    for checkout in args.checkouts:
        checkout = os.path.abspath(checkout)
        name = detect(checkout)
        suite = SUITES[name]
        print(f"== {name} ({checkout})", flush=True)
        for rel, reason in suite["excluded"].items():
            if os.path.exists(os.path.join(checkout, rel)):
                print(f"  SKIP {rel}: {reason}")
        for rel, cfg in suite["files"].items():
            if args.only and not any(o in rel for o in args.only):
                continue
            if not os.path.exists(os.path.join(checkout, rel)):
                print(f"  MISSING {rel}")
                continue
            r = run_file(checkout, rel, cfg, args.timeout, tmp, args.lock)
            verdict, line = summarize(rel, r)
            failed |= verdict != "PASS"
            print(f"  {verdict} {rel}: {line}", flush=True)
            if verdict != "PASS":
                for msg in r.get("failures", [])[:5]:
                    print("      " + msg.strip().replace("\n", "\n      ")[:1500])
            everything[f"{name}:{rel}"] = r
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1)
    print(f"logs: {tmp}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
