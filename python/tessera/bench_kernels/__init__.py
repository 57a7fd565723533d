"""Memory-bound tessera.tile_kernels against plain numpy and torch: ``python -m tessera.bench_kernels``
(``tessera bench kernels`` runs it and prints its table and summary; its help has the method).

Each row is one kernel on a DeepSeek-V3-like shape. Its operands are copied until the copies together
exceed 4x this machine's L3, and call i uses copy i % copies, so every call reads DRAM. Our result of
copy 0 is checked first against a float64 (or exact integer) reference on sampled rows, and so are the
peers'. Then ours and the peers run round by round (ours three times a round; a warm-up call each
first) and each median is taken; right after the row the DRAM copy bandwidth is measured in the same
process (tessera's machine-limit loop), the denominator of the row's %limit.

Every call allocates its outputs, as the public functions (and numpy and torch) do. The process runs
with glibc's mmap off (it re-executes itself with MALLOC_MMAP_MAX_=0 and a huge trim threshold), so
freed outputs are reused as under a caching allocator, the way TileKernels' own benchmarks see GPU
memory; with ``--fresh-outputs`` outputs past 32 MiB are fresh pages that the kernel zero-fills on first
touch (1.5-3x the time of write-heavy rows on the development host).

Prints one line per row: ``op m n k time_ms moved_bytes copy_gbps check name=ms ...`` (check: worst
error / tolerance, <= 1 passes; peers in order, ``nan`` when not available); ``--human`` adds a header.
"""
import argparse
import math
import os
import sys

from . import _cases_layout, _cases_moe, _cases_quant, _cases_simt
from ._case import next_row, reserve_arena
from ._timing import SETTLE_S, copies_beyond, interleaved_medians

# (tokens, hidden, ...) per size: quick (the default), --full, and --tiny (tests: seconds, no rotation)
_SIZES = {
    "quick": dict(tokens=1024, hidden=7168, moe_tokens=256, alignment=16, batches=8, batch_tokens=256,
                  engram_tokens=65536, softmax_rows=512, softmax_n=8192, budget_s=0.5, settle_s=SETTLE_S),
    "full": dict(tokens=8192, hidden=7168, moe_tokens=2048, alignment=64, batches=8, batch_tokens=2048,
                 engram_tokens=1 << 20, softmax_rows=4096, softmax_n=8192, budget_s=2.0, settle_s=SETTLE_S),
    "tiny": dict(tokens=256, hidden=384, moe_tokens=37, alignment=8, batches=3, batch_tokens=77,
                 engram_tokens=1001, softmax_rows=5, softmax_n=256, budget_s=0.0, settle_s=0.0),
}


def build_cases(size: str, l3_bytes: int, torch):
    """(op, maker) per row; a maker builds its case (and its rotation of operand copies) when called."""
    s = _SIZES[size]
    copies = (lambda nbytes: 1) if size == "tiny" else (lambda nbytes: copies_beyond(nbytes, l3_bytes))
    t, h = s["tokens"], s["hidden"]
    yield "per_token_cast", lambda: _cases_quant.per_token_cast(t, h, copies, torch)
    yield "per_block_cast", lambda: _cases_quant.per_block_cast(t, h, copies, torch)
    yield "cast_back", lambda: _cases_quant.cast_back(t, h, copies, torch)
    yield "expand_to_fused", lambda: _cases_moe.expand_to_fused(s["moe_tokens"], h, s["alignment"], copies, torch)
    yield "reduce_fused", lambda: _cases_moe.reduce_fused(s["moe_tokens"], h, s["alignment"], copies, torch)
    yield "transpose", lambda: _cases_layout.transpose(t, h, copies, torch)
    yield "batched_transpose", lambda: _cases_layout.batched_transpose(s["batches"], s["batch_tokens"], h, copies, torch)
    yield "engram_hash", lambda: _cases_layout.engram_hash(s["engram_tokens"], 2, 3, 8, copies, torch)
    yield "softmax_simt", lambda: _cases_simt.softmax_pair(s["softmax_rows"], s["softmax_n"], copies)


def measure_row(case, budget_s: float, measure_copy_gbps, settle_s: float = SETTLE_S):
    """(time_ms, copy_gbps, check, [(peer, ms)]) of one case; a peer whose result fails its check gets
    NaN (and a note on stderr)."""
    check = case.check(case.ours(0))
    peers = {}
    for name, call in case.peers.items():
        peer_check = case.check(call(0))
        if peer_check <= 1:
            peers[name] = call
        else:
            print(f"[bench kernels] {case.op}: peer {name} failed its check ({peer_check:.3g}); not timed",
                  file=sys.stderr)
    if check > 1:
        return math.nan, math.nan, check, [(name, math.nan) for name in case.peers]
    times = interleaved_medians({"ours": case.ours, **peers}, case.copies, budget_s,
                                ours_per_round=1 if case.op == "softmax_simt" else 3, settle_s=settle_s)
    copy_gbps = measure_copy_gbps()
    return times["ours"], copy_gbps, check, [(name, times.get(name, math.nan)) for name in case.peers]


def _reexec_with_reused_outputs(argv):
    """Runs this module again with glibc's mmap off (no return), unless it already is."""
    if os.environ.get("MALLOC_MMAP_MAX_") == "0":
        return
    env = dict(os.environ, MALLOC_MMAP_MAX_="0", MALLOC_TRIM_THRESHOLD_=str(1 << 40))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "tessera.bench_kernels", *argv], env)


def _torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tessera.bench_kernels", description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="the larger sizes (longer)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, no rotation, no timing budget (tests)")
    parser.add_argument("--human", action="store_true", help="a header and the ratios")
    parser.add_argument("--only", default="", help="comma-separated ops to run (default: all)")
    parser.add_argument("--fresh-outputs", action="store_true",
                        help="keep glibc's mmap: outputs past 32 MiB are fresh pages on every call")
    argv = sys.argv[1:] if argv is None else list(argv)
    opts = parser.parse_args(argv)
    if not opts.tiny and not opts.fresh_outputs:
        _reexec_with_reused_outputs(argv)
    import tessera
    from tessera import _C

    torch = _torch_or_none()
    if torch is not None:
        torch.set_num_threads(tessera.num_threads())  # the same thread count as ours
    size = "tiny" if opts.tiny else "full" if opts.full else "quick"
    measure = getattr(_C, "measure_dram_copy_gbps", None)
    measure_copy = (lambda: math.nan) if opts.tiny or measure is None else measure
    only = set(filter(None, opts.only.split(",")))
    if opts.human:
        outputs = "fresh pages past 32 MiB" if opts.fresh_outputs else "reused (glibc mmap off)"
        print(f"# threads {tessera.num_threads()}, torch {torch.__version__ if torch else 'not installed'}, "
              f"outputs {outputs}")
        print(f"{'op':18} {'m':>7} {'n':>6} {'k':>6} {'time_ms':>9} {'GB/s':>7} {'copy':>6} {'check':>7}  peers")
    l3_bytes = int(_C.cpu_info()["l3_bytes"])
    if size != "tiny":
        reserve_arena(int(4.5 * l3_bytes))
    for op, make in build_cases(size, l3_bytes, torch):
        if only and op not in only:
            continue
        next_row()
        case = make()
        ms, copy_gbps, check, peers = measure_row(case, _SIZES[size]["budget_s"], measure_copy, _SIZES[size]["settle_s"])
        peer_text = " ".join(f"{name}={t:.4f}" for name, t in peers)
        if opts.human:
            gbps = case.moved_bytes / ms * 1e-6
            ratios = " ".join(f"{name} {t / ms:.2f}x" for name, t in peers)
            print(f"{case.op:18} {case.m:7d} {case.n:6d} {case.k:6d} {ms:9.3f} {gbps:7.2f} {copy_gbps:6.2f} "
                  f"{check:7.3f}  {ratios}", flush=True)
        else:
            print(f"{case.op} {case.m} {case.n} {case.k} {ms:.4f} {case.moved_bytes} {copy_gbps:.3f} {check:.4g} "
                  f"{peer_text}", flush=True)
        del case
    return 0
