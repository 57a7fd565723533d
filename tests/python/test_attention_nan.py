"""NaN propagates through the attention kernels as on the GPU: a NaN in a query row makes that row's
output and lse NaN; a NaN in a key a row sees makes every row that sees it NaN; other rows are exact as
before. Run at every ISA level the machine has (the kernels differ per level; the rule does not)."""
import os
import subprocess
import sys

import pytest

import tessera

_ORDER = ["scalar", "avx2", "avx512", "avx512bf16", "amx"]
LEVELS = _ORDER[:_ORDER.index(tessera.cpu_info()["best_isa"]) + 1]

CHILD = r"""
import ml_dtypes, numpy as np
from tessera import flash_mla
rng = np.random.default_rng(5)
s_q, h_q, d_qk, d_v, n_kv, topk = 3, 16, 576, 512, 64, 32
q = (rng.standard_normal((s_q, h_q, d_qk)) / 8).astype(ml_dtypes.bfloat16)
kv = (rng.standard_normal((n_kv, 1, d_qk)) / 8).astype(ml_dtypes.bfloat16)
idx = np.stack([rng.permutation(n_kv)[:topk] for _ in range(s_q)]).astype(np.int32).reshape(s_q, 1, topk)
clean, _, clean_lse = flash_mla.flash_mla_sparse_fwd(q, kv, idx, d_qk ** -0.5, d_v)
q[1, 2, 7] = np.nan                      # one query row
kv[idx[2, 0, 5], 0, 100] = np.nan        # a key only query 2 sees (if query 0/1 also see it, they go NaN too)
seen = [int(idx[2, 0, 5]) in set(idx[r, 0].tolist()) for r in range(s_q)]
out, _, lse = flash_mla.flash_mla_sparse_fwd(q, kv, idx, d_qk ** -0.5, d_v)
out = out.astype(np.float32)
for r in range(s_q):
    for h in range(h_q):
        bad = seen[r] or (r, h) == (1, 2)
        assert np.isnan(out[r, h]).all() == bad and np.isnan(lse[r, h]) == bad, (r, h, bad)
        if not bad:
            assert (out[r, h] == clean[r, h].astype(np.float32)).all() and lse[r, h] == clean_lse[r, h]
print("ok")
"""


@pytest.mark.parametrize("level", LEVELS)
def test_nan_propagates_in_sparse_prefill(level):
    env = dict(os.environ, TESSERA_ISA=level)
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
