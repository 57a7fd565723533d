"""The Python path against the C++ entry: ``python -m tessera.bench_python`` (``tessera bench python``).

For each case the same operation runs two ways in one process, interleaved round by round so a shared
machine slows both alike:
  python  the public call (``tessera.deep_gemm``, ``tessera.flash_mla``, ``tessera.deep_ep``) with torch
          tensors, as DeepSeek's code calls it: argument checks, tensor marshalling, result wrapping;
  C++     the native entry that call reaches (``tessera._C``), with its array references made once:
          what a C++ program calling tessera's API pays, plus one binding call (about a microsecond).
ratio = python time / C++ time; the target is <= 1.2 for every case. Under ``mpirun -np R`` (R >= 2)
the expert-parallel dispatch and combine run too (DeepEP's standard shape, 4096 tokens per rank).

Prints one line per case: ``op m n k python_ms cpp_ms`` (rank 0 only); ``--human`` adds a header.
Needs torch; without it prints ``skip: torch is not installed`` and exits 0.
"""
import argparse
import statistics
import sys
import time

import numpy as np


def _median_pair(python_call, cpp_call, budget_s: float = 0.4, min_rounds: int = 5, barrier=None):
    """Medians (ms) of the two calls, alternating, after one warm-up call of each."""
    python_call(), cpp_call()
    py, cc = [], []
    start = time.perf_counter()
    while len(py) < min_rounds or time.perf_counter() - start < budget_s:
        for call, out in ((python_call, py), (cpp_call, cc)):
            if barrier:
                barrier()
            t = time.perf_counter()
            call()
            out.append((time.perf_counter() - t) * 1e3)
        if len(py) >= 200:
            break
    return statistics.median(py), statistics.median(cc)


def _gemm_cases(torch, rows):
    from . import _C
    from . import deep_gemm
    from ._arrays import to_ref
    from .deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

    n, k = 4096, 7168
    for m in (4, 128):
        a = torch.randn(m, k).to(torch.bfloat16)
        b = torch.randn(n, k).to(torch.bfloat16)
        d = torch.empty(m, n, dtype=torch.bfloat16)
        refs = (to_ref(a, "bench", "a"), to_ref(b, "bench", "b"), to_ref(d, "bench", "d", writable=True), None)
        rows.append(("bf16_gemm_nt", m, n, k) + _median_pair(lambda: deep_gemm.bf16_gemm_nt(a, b, d),
                                                               lambda: _C.bf16_gemm_nt(*refs)))
    m = 128
    a = per_token_cast_to_fp8(torch.randn(m, k).to(torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k).to(torch.bfloat16), use_ue8m0=False)
    d = torch.empty(m, n, dtype=torch.bfloat16)
    fn = "bench"
    refs = (to_ref(a[0], fn, "a"), to_ref(a[1], fn, "a.scale"), to_ref(b[0], fn, "b"), to_ref(b[1], fn, "b.scale"),
            to_ref(d, fn, "d", writable=True), None, None, None, None, False)
    rows.append(("fp8_gemm_nt", m, n, k) + _median_pair(lambda: deep_gemm.fp8_gemm_nt(a, b, d),
                                                          lambda: _C.fp8_fp4_gemm_nt(*refs)))


def _attention_cases(torch, rows):
    from . import _C
    from . import flash_mla
    from ._arrays import to_ref

    # Sparse prefill: s_q queries of h_q heads, each attending topk of the kv's tokens.
    s_q, h_q, d_qk, d_v, kv_tokens, topk = 64, 64, 576, 512, 8192, 2048
    q = (torch.randn(s_q, h_q, d_qk) / 8).to(torch.bfloat16)
    kv = (torch.randn(kv_tokens, 1, d_qk) / 8).to(torch.bfloat16)
    gen = np.random.default_rng(3)
    idx = torch.from_numpy(np.stack([gen.choice(kv_tokens, topk, replace=False) for _ in range(s_q)])
                           .astype(np.int32).reshape(s_q, 1, topk))
    scale = d_qk ** -0.5
    out = np.empty((s_q, h_q, d_v), dtype=_bf16())
    max_logits = np.empty((s_q, h_q), np.float32)
    lse = np.empty((s_q, h_q), np.float32)
    fn = "bench"
    refs = (to_ref(q, fn, "q"), to_ref(kv, fn, "kv"), to_ref(idx, fn, "indices"), scale, d_v, None, None,
            to_ref(out, fn, "out", writable=True), to_ref(max_logits, fn, "m", writable=True),
            to_ref(lse, fn, "lse", writable=True))
    rows.append(("flash_mla_sparse_fwd", s_q, h_q, topk) + _median_pair(
        lambda: flash_mla.flash_mla_sparse_fwd(q, kv, idx, scale, d_v), lambda: _C.flash_mla_sparse_fwd(*refs)))


def _bf16():
    import ml_dtypes
    return ml_dtypes.bfloat16


def _ep_cases(torch, rows):
    from . import deep_ep
    from ._arrays import to_ref

    group = deep_ep.Group.world()
    if group.size() < 2:
        return
    tokens, hidden, topk, experts = 4096, 7168, 8, 256
    buf = deep_ep.ElasticBuffer(group, num_max_tokens_per_rank=tokens, hidden=hidden, num_topk=topk)
    gen = np.random.default_rng(11 + group.rank())
    x = torch.from_numpy(gen.standard_normal((tokens, hidden)).astype(np.float32)).to(torch.bfloat16)
    idx = torch.from_numpy(np.stack([gen.permutation(experts)[:topk] for _ in range(tokens)]).astype(np.int64))
    w = torch.ones(tokens, topk)
    fn = "bench"
    rt = buf.runtime
    native_args = (to_ref(x, fn, "x"), None, to_ref(idx, fn, "topk_idx"), to_ref(w, fn, "topk_weights"), None,
                   experts, 0, 0, None, True, None, False, False, False, False, 0)

    def python_dispatch():
        return buf.dispatch(x, topk_idx=idx, topk_weights=w, num_experts=experts)

    rows.append(("ep_dispatch_bf16", tokens, hidden, topk) + _median_pair(
        python_dispatch, lambda: rt.dispatch(*native_args), barrier=group.barrier))
    recv_x, _, _, handle, _ = python_dispatch()
    combine_args = (to_ref(recv_x, fn, "x"), handle._native, None)  # as combine(recv_x, handle) passes them
    rows.append(("ep_combine_bf16", tokens, hidden, topk) + _median_pair(
        lambda: buf.combine(recv_x, handle), lambda: rt.combine(*combine_args, None, None, False, 0),
        barrier=group.barrier))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tessera.bench_python", description=__doc__.split("\n")[0])
    parser.add_argument("--human", action="store_true", help="print a header and ratios")
    opts = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("skip: torch is not installed")
        return 0
    rows = []
    rank = 0
    try:
        from . import deep_ep
        group_size = deep_ep.Group.world().size() if _under_mpirun() else 1
        rank = deep_ep.Group.world().rank() if group_size > 1 else 0
    except Exception:  # no MPI in this build: single process
        group_size = 1
    if group_size > 1:
        _ep_cases(torch, rows)
    else:
        _gemm_cases(torch, rows)
        _attention_cases(torch, rows)
    if rank != 0:
        return 0
    if opts.human:
        print(f"{'op':24} {'m':>6} {'n':>6} {'k':>6} {'python_ms':>10} {'cpp_ms':>10} {'ratio':>7}")
    for op, m, n, k, py, cc in rows:
        line = f"{op:24} {m:6d} {n:6d} {k:6d} {py:10.4f} {cc:10.4f}"
        print(line + (f" {py / cc:6.2f}x" if opts.human else ""))
    return 0


def _under_mpirun() -> bool:
    import os
    return any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


if __name__ == "__main__":
    sys.exit(main())
