"""Warp-synchronous loops with per-thread bounds in per-thread (SIMT) kernels, ``__match_any_sync``
through ``T.call_extern`` and ``T.popcount``: the pattern of TileKernels' get_fused_mapping (each warp
walks its own range 32 elements at a time and ranks equal values within each step), checked against a
numpy reference; unknown extern names and non-integer popcounts raise."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera import InvalidArgumentError, NotImplementedInTessera


@tessera.jit
def rank_in_step(threads, per_warp):
    """Warp w takes elements [w * per_warp, min((w + 1) * per_warp, n)) in steps of 32 (one per lane);
    rank[i]: how many lanes before i's in its step hold the same value, group[i]: how many hold it."""
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n,), "int32"), rank: T.Tensor((n,), "int32"), group: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=threads) as (pid,):
            tid = T.get_thread_binding()
            warp = tid // 32
            lane = tid % 32
            start = T.alloc_var("int32")
            end = T.alloc_var("int32")
            start = warp * per_warp
            end = T.min(start + per_warp, n)
            aligned_end = (end + 31) // 32 * 32
            below = T.uint32(1 << lane) - 1
            # trip counts differ between warps (the last warps may have none): a guarded block-level loop
            for i in T.serial(start + lane, aligned_end, 32):
                v = T.Select(i < end, T.int32(x[T.min(i, n - 1)]), -1)
                mask = T.call_extern(T.uint32, "__match_any_sync", 0xFFFFFFFF, v)
                count = T.popcount(mask & below)
                if i < end and v >= 0:
                    rank[i] = count
                    group[i] = T.popcount(mask)
                T.sync_warp()
    return main


def _reference(x, threads, per_warp):
    n = len(x)
    rank, group = np.full(n, -7, np.int32), np.full(n, -7, np.int32)
    for w in range(threads // 32):
        s, e = w * per_warp, min((w + 1) * per_warp, n)
        for base in range(s, e, 32):
            step = x[base:min(base + 32, e)]
            for j, v in enumerate(step):
                rank[base + j] = np.sum(step[:j] == v)
                group[base + j] = np.sum(step == v)
    return rank, group


@pytest.mark.parametrize("n", [1, 45, 200, 300])
def test_match_any_ranks_equal_values_per_step(n):
    threads, per_warp = 128, 64
    x = np.random.default_rng(n).integers(0, 5, n).astype(np.int32)
    rank, group = np.full(n, -7, np.int32), np.full(n, -7, np.int32)
    rank_in_step(threads, per_warp).call_all([x, rank, group])
    want_rank, want_group = _reference(x, threads, per_warp)  # elements past 4 * 64 stay untouched
    np.testing.assert_array_equal(rank, want_rank)
    np.testing.assert_array_equal(group, want_group)


@tessera.jit
def popcounts():
    @T.prim_func
    def main(a: T.Tensor((37,), "int32"), b: T.Tensor((37,), "int64"), out: T.Tensor((37, 2), "int32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(37):
                out[i, 0] = T.popcount(a[i])
                out[i, 1] = T.popcount(b[i])
    return main


def test_popcount_counts_twos_complement_bits():
    rng = np.random.default_rng(3)
    a = rng.integers(-2**31, 2**31, 37, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**63, 2**63 - 1, 37, dtype=np.int64)
    a[:3] = [0, -1, np.iinfo(np.int32).min]
    out = np.zeros((37, 2), np.int32)
    popcounts().call_all([a, b, out])
    want_a = [bin(int(v) & 0xFFFFFFFF).count("1") for v in a]
    want_b = [bin(int(v) & 0xFFFFFFFFFFFFFFFF).count("1") for v in b]
    np.testing.assert_array_equal(out[:, 0], want_a)
    np.testing.assert_array_equal(out[:, 1], want_b)


def test_unknown_extern_and_float_popcount_raise():
    with pytest.raises(NotImplementedInTessera, match="__nv_fast_rcp"):
        @T.prim_func
        def ext(x: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                x[bx] = T.call_extern(T.float32, "__nv_fast_rcp", x[bx])
    with pytest.raises(InvalidArgumentError, match="T.popcount"):
        @T.prim_func
        def pc(x: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                x[bx] = T.popcount(x[bx])
