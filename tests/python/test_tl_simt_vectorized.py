"""Per-thread (SIMT) kernels whose block-uniform T.serial loops are interchanged with the thread loop
(_simt.py), so the thread loops inside them run as vector lanes: per-thread accumulators live across
the interchanged loops, thread counts that are not a multiple of the vector width leave a tail, and
the results match float64 / exact references. The generated source has a vectorized thread loop."""
import re

import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T


@tessera.jit(out_idx=[-1])
def strided_row_stats(cols, threads):
    rows = T.dynamic("rows")
    steps = cols // threads

    @T.prim_func
    def main(x: T.Tensor((rows, cols), "float32"), out: T.Tensor((rows, 2, threads), "float32")):
        with T.Kernel(rows, threads=threads) as row:
            tid = T.get_thread_binding()
            acc = T.alloc_local((2,), "float32")
            acc[0] = -T.infinity("float32")
            acc[1] = 0.0
            scale = x[row, tid] * 0.0 + 2.0  # a per-thread value used inside the interchanged loops
            for j in T.serial(steps):  # thread tid reads columns tid, tid + threads, ...
                acc[0] = T.max(acc[0], x[row, j * threads + tid])
            for j in T.serial(steps):
                acc[1] += (x[row, j * threads + tid] - acc[0]) * scale
            out[row, 0, tid] = acc[0]
            out[row, 1, tid] = acc[1]
    return main


@pytest.mark.parametrize("rows,cols,threads", [(3, 96, 24), (5, 256, 128), (1, 40, 8)])
def test_interchanged_per_thread_loops_match_reference(rng, rows, cols, threads):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = strided_row_stats(cols, threads)(x)
    per_thread = x.reshape(rows, cols // threads, threads).astype(np.float64)  # [row, step, tid]
    mx = per_thread.max(axis=1)
    np.testing.assert_array_equal(out[:, 0], mx.astype(np.float32))
    np.testing.assert_allclose(out[:, 1], ((per_thread - mx[:, None]) * 2.0).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_the_thread_loop_inside_a_uniform_loop_is_vectorized():
    if tessera.cpu_info()["active_isa"] == "scalar":
        pytest.skip("the scalar level has no vector loops")
    src = strided_row_stats(256, 128).get_kernel_source()
    assert re.search(r"for \(; tid\w* \+ (8|16) <= tid\w*_end; tid\w* \+= (8|16)\)", src), src


@tessera.jit(out_idx=[-1])
def block_base_reads(threads):
    @T.prim_func
    def main(x: T.Tensor((threads,), "float32"), out: T.Tensor((7, threads), "float32")):
        with T.Kernel(1, threads=threads) as _:
            tid = T.get_thread_binding()
            out[0, tid] = x[tid - tid % 32]  # one address per vector of lanes: a broadcast load
            out[1, tid] = x[tid - tid % 16 + 3]
            out[2, tid] = x[tid // 8 * 8]
            out[3, tid] = x[(tid // 16) * 2]
            out[4, tid] = x[tid - tid % 4]  # a group smaller than a vector: a gather
            out[5, tid] = x[tid // 2]
            if threads % 32 == 0:  # a warp reduction reads its lanes at the warp's base
                out[6, tid] = T.warp_reduce_sum(x[tid])
            else:
                out[6, tid] = 0.0
    return main


@pytest.mark.parametrize("threads", [128, 40])  # 40: a tail of lanes past the last whole vector
def test_reads_at_a_group_base_match_reference(rng, threads):
    x = rng.standard_normal(threads).astype(np.float32)
    out = block_base_reads(threads)(x)
    t = np.arange(threads)
    for row, index in enumerate([t - t % 32, t - t % 16 + 3, t // 8 * 8, (t // 16) * 2, t - t % 4, t // 2]):
        np.testing.assert_array_equal(out[row], x[index])
    if threads % 32 == 0:
        np.testing.assert_allclose(out[6], np.repeat(x.reshape(-1, 32).sum(axis=1, dtype=np.float64), 32), atol=1e-5)


def test_warp_reductions_read_their_lanes_without_gathers():
    if tessera.cpu_info()["active_isa"] == "scalar":
        pytest.skip("the scalar level has no vector loops")
    src = block_base_reads(128).get_kernel_source()
    assert not re.search(r"_g\(warp_exchange", src), src
