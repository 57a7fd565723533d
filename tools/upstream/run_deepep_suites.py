#!/usr/bin/env python3
"""Runs DeepEP's own test files against tessera.deep_ep.

    .venv/bin/python tools/upstream/run_deepep_suites.py /path/to/DeepEP [--only test_ep] [--ranks 2]

The test files run unchanged from the DeepEP checkout. What differs from a GPU run:
  * ``deep_ep`` is tools/upstream/deepep_shim/deep_ep: tessera.deep_ep under DeepEP's name, with torch's
    CUDA device mapped to the CPU (deep_ep/_cpu_mapping.py);
  * deep_ep.utils.envs / testing are CPU versions (a gloo process group; wall-clock timing instead of
    CUDA events and the kineto profiler); math, refs and gate come from the checkout;
  * ranks are started by ``mpirun -np R`` (tessera's groups are MPI communicators), each running the
    file with ``--num-processes 1``, so the file's own torch.multiprocessing.spawn starts one child
    per MPI rank;
  * shapes are reduced to fit a small CPU (SUITES below).
Each file passes when every rank exits with status 0. Prints one line per file and a summary.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SHIM = Path(__file__).resolve().parent / "deepep_shim"

# (file in the checkout, reduced arguments).
SUITES = [
    ("tests/legacy/test_intranode.py", ["--num-tokens", "128", "--hidden", "512", "--num-topk", "4",
                                        "--num-experts", "16"]),
    ("tests/legacy/test_low_latency.py", ["--num-tokens", "32", "--hidden", "1024", "--num-topk", "4",
                                          "--num-experts", "16"]),
    ("tests/elastic/test_ep.py", ["--num-tokens", "64", "--hidden", "512", "--num-topk", "4",
                                  "--num-experts", "16"]),
    ("tests/elastic/test_engram.py", ["--num-entries", "4096", "--hidden", "128", "--num-tokens", "64",
                                      "--num-entries-per-token", "4"]),
    ("tests/elastic/test_agrs.py", ["--num-stress-iterations", "2"]),
    ("tests/elastic/test_pp.py", ["--num-tokens", "64", "--hidden", "512", "--num-sends", "16",
                                  "--num-stress-iterations", "2"]),
    ("tests/elastic/test_barrier.py", []),
]


def _env(checkout: Path, port: int) -> dict:
    env = dict(os.environ)
    env.update(PYTHONPATH=os.pathsep.join(p for p in (str(SHIM), env.get("PYTHONPATH", "")) if p),
               TESSERA_DEEPEP_CHECKOUT=str(checkout), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_hwloc_base_binding_policy="none",
               EP_SUPPRESS_NCCL_CHECK="1")
    env.setdefault("TESSERA_NUM_THREADS", "1")
    return env


def run_one(checkout: Path, rel: str, extra: list, ranks: int, port: int, timeout: float, log_dir: Path):
    test = checkout / rel
    cmd = [shutil.which("mpirun") or "mpirun", "-np", str(ranks), sys.executable, str(test),
           "--num-processes", "1", *extra]
    start = time.time()
    try:
        proc = subprocess.run(cmd, cwd=test.parent, env=_env(checkout, port), capture_output=True, text=True,
                              timeout=timeout)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    log = log_dir / (Path(rel).stem + ".log")
    log.write_text(f"$ {' '.join(cmd)}\n{out}")
    return rc == 0, rc, time.time() - start, log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="a DeepEP source tree (its tests/ and deep_ep/utils/)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--only", action="append", default=[], help="run files whose name contains this")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per file")
    parser.add_argument("--logs", type=Path, default=Path("build/deepep-suites"))
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    if not (checkout / "deep_ep" / "utils" / "refs.py").is_file():
        parser.error(f"{checkout} does not look like a DeepEP checkout (no deep_ep/utils/refs.py)")
    args.logs.mkdir(parents=True, exist_ok=True)
    failures = 0
    for i, (rel, extra) in enumerate(SUITES):
        if args.only and not any(o in rel for o in args.only):
            continue
        ok, rc, secs, log = run_one(checkout, rel, extra, args.ranks, 29500 + (os.getpid() % 200) * 10 + i,
                                    args.timeout, args.logs)
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} {rel} ({args.ranks} ranks, {secs:.0f} s, rc={rc}) log: {log}", flush=True)
    print(f"{failures} file(s) failed" if failures else "all files passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
