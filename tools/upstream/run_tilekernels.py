#!/usr/bin/env python3
"""Measures how much of DeepSeek's TileKernels compiles and runs on tessera through the ``tilelang`` alias.

usage: run_tilekernels.py CHECKOUT [--only SUBSTR] [--cases N] [--timeout S] [--lock F] [--json OUT]

CHECKOUT is a TileKernels source tree (run where it is, never copied into tessera). Each test file
(tests/*/test_*.py) runs in its own process: ``python -m pytest`` with tessera's alias folder first
on PYTHONPATH and shim/tilekernels_plugin.py loaded, which maps ``cuda`` to the CPU, keeps the
first N parametrized cases of each test function (no benchmarks) and records which ``@tilelang.jit``
factories compiled and ran. A test passes when TileKernels' own assertions against its torch
references (tile_kernels/torch) hold.

Prints, per ``*_kernel.py`` file: kernels compiled / declared, whether one ran, whether the tests
that ran it all passed (matched), and the first error attributed to the file; then the counts.
"""
import argparse
import ast
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def alias_path():
    out = subprocess.run([sys.executable, "-m", "tessera.tilelang_compat", "--path"], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def declared_kernels(checkout):
    """{kernel file relative to tile_kernels/: [names of its @tilelang.jit functions]}."""
    table = {}
    for path in sorted(glob.glob(os.path.join(checkout, "tile_kernels", "**", "*_kernel.py"), recursive=True)):
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        names = [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                 and any("jit" in ast.unparse(d) for d in node.decorator_list)]
        table[os.path.relpath(path, os.path.join(checkout, "tile_kernels")).replace(os.sep, "/")] = names
    return table


def run_test_file(checkout, test, args, alias, logdir, cache):
    name = os.path.relpath(test, checkout).replace(os.sep, "/")
    result = os.path.join(logdir, name.replace("/", "__") + ".json")
    log = result[:-5] + ".log"
    env = dict(os.environ, PYTHONUNBUFFERED="1", TK_RESULT=result, TK_CASES=str(args.cases), TK_CHECKOUT=checkout,
               TESSERA_TL_CACHE=cache, TILELANG_PRINT_ON_COMPILATION="0")
    env["PYTHONPATH"] = os.pathsep.join([alias, os.path.join(HERE, "shim"), checkout] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "tilekernels_plugin", "-p", "no:cacheprovider",
           "--tb=short", name]
    if args.lock:  # shared machines: hold the CPU lock per file, not for the whole run
        cmd = ["flock", args.lock] + cmd
    start = time.time()
    with open(log, "w") as f:
        # its own process group: on a timeout the test process under flock is ended too (killing only
        # flock left it running, holding the CPU lock, so the next files timed out waiting for it)
        proc = subprocess.Popen(cmd, cwd=checkout, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = "timeout"
    data = {"items": [], "compiled": {}, "ran": {}}
    if os.path.exists(result):
        with open(result) as f:
            data = json.load(f)
    elif rc != "timeout":
        with open(log) as f:
            tail = [l.strip() for l in f.read().splitlines() if l.strip()]
        data["crash"] = next((l for l in reversed(tail) if "Error" in l), tail[-1] if tail else "")[:300]
    data.update(test=name, rc=rc, seconds=round(time.time() - start, 1), log=log)
    return data


def summarize(kernels, runs):
    files = {f: {"declared": names, "compiled": set(), "ran": False, "passed": 0, "failed": 0, "error": ""}
             for f, names in kernels.items()}
    for run in runs:
        for key in run["compiled"]:
            f, fn = key.split("::")
            if f in files:
                files[f]["compiled"].add(fn)
        for key in run["ran"]:
            if key.split("::")[0] in files:
                files[key.split("::")[0]]["ran"] = True
        for item in run["items"]:
            touched = {k.split("::")[0] for k in item.get("ran", []) + item.get("compiled", [])}
            for f in touched & files.keys():
                files[f]["passed" if item["outcome"] == "passed" else "failed"] += 1
            site = (item.get("error_site") or "").split(":")[0]
            if site in files and not files[site]["error"]:
                files[site]["error"] = f"{item['error_site']}: {item['error']}"
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout")
    ap.add_argument("--only", default=None, help="run the test files whose path contains this")
    ap.add_argument("--cases", type=int, default=2, help="parametrized cases kept per test function")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--lock", default="/tmp/tessera-cpu.lock")
    ap.add_argument("--json", default=None)
    ap.add_argument("--logdir", default=None)
    args = ap.parse_args()
    checkout = os.path.abspath(args.checkout)
    tests = sorted(glob.glob(os.path.join(checkout, "tests", "*", "test_*.py")))
    if args.only:
        tests = [t for t in tests if args.only in t]
    logdir = args.logdir or tempfile.mkdtemp(prefix="tilekernels-")
    os.makedirs(logdir, exist_ok=True)
    cache = os.environ.get("TESSERA_TL_CACHE") or os.path.join(logdir, "tl-cache")
    alias = alias_path()
    runs = []
    for test in tests:
        run = run_test_file(checkout, test, args, alias, logdir, cache)
        outcomes = [i["outcome"] for i in run["items"]]
        first = next((i["error"] for i in run["items"] if i["error"]), run.get("crash", ""))
        print(f"{run['test']:<58} {outcomes.count('passed')}/{len(outcomes)} passed  {run['seconds']:>6} s  "
              f"rc={run['rc']}  {first[:150]}", flush=True)
        runs.append(run)
    kernels = declared_kernels(checkout)
    files = summarize(kernels, runs)
    print()
    print(f"{'kernel file':<58} {'compiled':>8} {'ran':>4} {'matched':>7}  first error")
    for f, s in files.items():
        matched = s["ran"] and s["passed"] > 0 and s["failed"] == 0
        print(f"{f:<58} {len(s['compiled']):>3} / {len(s['declared']):<2} {'yes' if s['ran'] else '-':>4} "
              f"{'yes' if matched else '-':>7}  {s['error'][:160]}")
    n_files = len(files)
    compiled_files = sum(1 for s in files.values() if s["compiled"])
    ran_files = sum(1 for s in files.values() if s["ran"])
    matched_files = sum(1 for s in files.values() if s["ran"] and s["passed"] > 0 and s["failed"] == 0)
    n_kernels = sum(len(s["declared"]) for s in files.values())
    compiled_kernels = sum(len(s["compiled"] & set(s["declared"])) for s in files.values())
    print()
    print(f"kernel files: {compiled_files} of {n_files} compiled a kernel, {ran_files} ran one, "
          f"{matched_files} matched TileKernels' torch references")
    print(f"@tilelang.jit kernels compiled: {compiled_kernels} of {n_kernels}")
    print(f"logs: {logdir}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "files": {k: dict(v, compiled=sorted(v["compiled"])) for k, v in files.items()}},
                      f, indent=1)


if __name__ == "__main__":
    main()
