"""Transposed reads of on-chip buffers in vectorized loops (`tile[j, i]` with j the vector axis): the
CPU code generation transposes VW x VW blocks in registers (tlrt::transpose_block) where the loop
matches, and keeps per-lane reads where it does not. Exact against numpy at every x86 ISA level and
the scalar one: 4- and 8-byte buffers, tiles that match and tiles that do not, a read at a column
offset, tensors with tails in both dimensions."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T

ISAS = ["avx2", "avx512", "avx512bf16", "scalar"]


@tessera.jit(out_idx=[-1])
def tile_transpose(dtype, tr, tc, col0):
    """out = x.T through a (tr, tc + col0) shared tile whose columns col0.. hold the block."""
    rows, cols = T.dynamic("rows"), T.dynamic("cols")

    @T.prim_func
    def main(x: T.Tensor((rows, cols), dtype), out: T.Tensor((cols, rows), dtype)):
        with T.Kernel(T.ceildiv(cols, tc), T.ceildiv(rows, tr), threads=128) as (by, bx):
            tile = T.alloc_shared((tr, tc + col0), dtype)
            T.copy(x[bx * tr:(bx + 1) * tr, by * tc:(by + 1) * tc], tile[:, col0:col0 + tc])
            for i, j in T.Parallel(tc, tr):
                out[by * tc + i, bx * tr + j] = tile[j, col0 + i]
    return main


def target_of(src):
    """The ISA level in the generated source's first line ("... for target cpu-avx512: ...")."""
    return src.split("for target cpu-", 1)[1].split(":", 1)[0]


def random_values(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "float64"])
@pytest.mark.parametrize("tr, tc, col0, registers", [(64, 64, 0, True), (32, 48, 16, True), (20, 24, 0, False)])
def test_transposed_read_is_exact(rng, isa, dtype, tr, tc, col0, registers):
    tessera.set_isa(isa)
    try:
        kernel = tile_transpose(dtype, tr, tc, col0)
        src = kernel.get_kernel_source()
        for shape in [(tr * 2 + 3, tc * 3 - 5), (tr, tc), (1, 7)]:
            x = random_values(rng, shape, dtype)
            np.testing.assert_array_equal(kernel(x).view(np.uint8), np.ascontiguousarray(x.T).view(np.uint8))
    finally:
        tessera.set_isa(None)
    lanes = 8 if target_of(src) == "avx2" else 16
    expect = registers and target_of(src) != "scalar" and tr % lanes == 0 and tc % lanes == 0
    assert ("tlrt::transpose_block" in src) == expect, (target_of(src), dtype, tr, tc)
    assert ("_g(tile" in src) == (not expect and target_of(src) != "scalar")


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_transposed_read_is_the_same_on_every_thread_count(rng, dtype):
    kernel = tile_transpose(dtype, 64, 64, 0)
    x = random_values(rng, (301, 259), dtype)
    outs = []
    for threads in (1, 2, 3):
        tessera.set_num_threads(threads)
        outs.append(kernel(x).view(np.uint8).copy())
    tessera.set_num_threads(0)
    want = np.ascontiguousarray(x.T).view(np.uint8)
    assert all(np.array_equal(o, want) for o in outs)
