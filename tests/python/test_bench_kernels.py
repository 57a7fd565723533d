"""python -m tessera.bench_kernels (tessera bench kernels) on tiny sizes: every row is verified and well
formed, and the checks reject wrong results (no timing assertions: speed lives in the bench)."""
import contextlib
import io
import math

import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

from tessera import bench_kernels
from tessera.bench_kernels import _cases_layout, _cases_quant, _cases_simt

OPS = ["per_token_cast", "per_block_cast", "cast_back", "expand_to_fused", "reduce_fused", "transpose",
       "batched_transpose", "engram_hash", "softmax_simt"]


def run_tiny(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert bench_kernels.main(["--tiny", *args]) == 0
    return out.getvalue().splitlines()


def test_tiny_run_rows_are_verified_and_well_formed():
    try:
        import torch  # noqa: F401
        has_torch = True
    except ImportError:
        has_torch = False
    lines = run_tiny()
    assert [line.split()[0] for line in lines] == OPS
    for line in lines:
        fields = line.split()
        op, (m, n, k), ms, moved = fields[0], map(int, fields[1:4]), float(fields[4]), int(fields[5])
        check = float(fields[7])
        peers = dict(p.split("=") for p in fields[8:])
        assert m > 0 and n > 0 and k >= 0 and moved > 0, line
        assert 0 <= check <= 1, line  # ours passed its float64 / exact check
        assert math.isfinite(ms) and ms > 0, line
        assert math.isnan(float(fields[6])), line  # --tiny measures no copy bandwidth
        want = ["tl_tile"] if op == "softmax_simt" else ["numpy", "torch"] if has_torch else ["numpy"]
        assert list(peers) == want, line
        assert all(math.isfinite(float(t)) and float(t) > 0 for t in peers.values()), line  # peers passed too


def test_only_selects_rows():
    assert [line.split()[0] for line in run_tiny("--only", "transpose,engram_hash")] == ["transpose", "engram_hash"]


def one(nbytes):
    return 1


def test_cast_check_rejects_wrong_factors_and_codes():
    case = _cases_quant.per_token_cast(256, 384, one, None)
    codes, sf = case.ours(0)
    assert case.check((codes, sf)) <= 1
    assert case.check((codes, sf * np.float32(1.001))) > 1  # factors off by 0.1%
    bad = codes.copy()
    bad[0, 5] = -bad[0, 5] if float(bad[0, 5]) != 0 else np.float32(1)  # row 0 is always checked
    assert case.check((bad, sf)) > 1


def test_exact_checks_reject_one_changed_element():
    case = _cases_layout.engram_hash(333, 2, 3, 4, one, None)
    out = case.ours(0).copy()
    assert case.check(out) == 0
    out[1, 200, 3] += 1  # exact checks compare every element
    assert case.check(out) == math.inf


def test_softmax_kernels_match_float64_on_odd_row_counts(rng):
    case = _cases_simt.softmax_pair(7, 384, one)
    assert case.check(case.ours(0)) <= 1 and case.check(case.peers["tl_tile"](0)) <= 1
    with pytest.raises(ValueError, match="multiple of threads"):
        _cases_simt.softmax_pair(3, 100, one)
