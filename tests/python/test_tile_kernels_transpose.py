"""tessera.tile_kernels.transpose: exact against numpy's transpose, odd sizes, strided rows, torch."""
import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera.tile_kernels import transpose as TR


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float32, ml_dtypes.float8_e4m3fn])
def test_batched_transpose_odd_sizes(rng, dtype):
    x = rng.standard_normal((3, 130, 77)).astype(dtype)
    got = TR.batched_transpose(x)
    assert got.dtype == x.dtype and np.array_equal(got.view(np.uint8), x.transpose(0, 2, 1).copy().view(np.uint8))


def test_transpose_of_row_strided_view_and_torch(rng):
    torch = pytest.importorskip("torch")
    base = rng.standard_normal((100, 256)).astype(np.float32)
    view = base[:, :192]  # row stride 256
    assert np.array_equal(TR.transpose(view), view.T)
    t = TR.transpose(torch.from_numpy(base))
    assert isinstance(t, torch.Tensor) and t.is_contiguous() and np.array_equal(t.numpy(), base.T)


def test_bad_input():
    with pytest.raises(tessera.InvalidArgumentError, match=r"batched_transpose: argument 'x' must have 3 dim"):
        TR.batched_transpose(np.zeros((4, 4), np.float32))
    with pytest.raises(tessera.InvalidArgumentError, match=r"transpose: argument 'x' must have dtype"):
        TR.transpose(np.zeros((4, 4), np.complex64))


def test_bf16_bits_are_moved_not_converted(rng):
    """NaN payloads, signalling NaNs, -0.0 and subnormals keep their exact bits (numpy and torch)."""
    x = rng.standard_normal((2, 70, 45)).astype(ml_dtypes.bfloat16)
    x.view(np.uint16)[0, 0, :6] = [0x7FC1, 0xFF81, 0x7F81, 0x0001, 0x8000, 0x807F]
    got = TR.batched_transpose(x)
    assert np.array_equal(got.view(np.uint16), x.transpose(0, 2, 1).view(np.uint16))
    torch = pytest.importorskip("torch")
    t = TR.transpose(torch.from_numpy(x[0].view(np.int16)).view(torch.bfloat16))
    assert np.array_equal(t.view(torch.int16).numpy(), x[0].T.view(np.int16))


ALL_DTYPES = [ml_dtypes.bfloat16, np.float32, ml_dtypes.float8_e4m3fn, np.int8, np.uint8, np.int32, np.int64,
              np.float64]


def random_bits(rng, shape, dtype):
    """Every bit pattern equally likely (NaN payloads, subnormals and -0.0 included): the bits must move."""
    nbytes = np.dtype(dtype).itemsize
    return rng.integers(0, 256, size=(*shape, nbytes), dtype=np.uint8).view(dtype).reshape(shape)


@pytest.mark.parametrize("isa", ["avx2", "avx512", "avx512bf16", "scalar"])
def test_every_dtype_at_every_isa_level(rng, isa):
    """Tails in both dimensions (not multiples of the 64 x 128 tile nor of the vector lanes), whole
    tiles, a single row and column, short output rows (blocks walk rows first) and long ones (columns
    first), row counts that let 1- and 2-byte values go 4 or 2 rows to a 32-bit word (1100, 128, 64),
    only 2 (130) or neither (131, 7); bit-exact against numpy's transpose."""
    from tessera.tile_kernels import _kernels_transpose as K

    tessera.set_isa(isa)
    try:
        for dtype in ALL_DTYPES:
            for shape in [(2, 131, 201), (1, 128, 256), (3, 64, 64), (1, 1, 9), (2, 7, 1), (1, 1100, 75), (2, 130, 67)]:
                x = random_bits(rng, shape, dtype)
                got = TR.batched_transpose(x)
                assert got.dtype == x.dtype and got.shape == (shape[0], shape[2], shape[1])
                assert np.array_equal(got.view(np.uint8), x.transpose(0, 2, 1).copy().view(np.uint8)), (dtype, shape)
            x2 = random_bits(rng, (77, 300), dtype)
            assert np.array_equal(TR.transpose(x2).view(np.uint8), x2.T.copy().view(np.uint8)), dtype
        # the tile's columns are read through register transposes at the x86 SIMD levels, per lane at
        # scalar (a host without AVX2 runs every cap at scalar)
        active = tessera.cpu_info()["active_isa"]
        for rows_first in (False, True):
            src = K.batched_transpose("int16", "int32", rows_first).get_kernel_source()
            assert ("tlrt::transpose_block" in src) == (active in ("avx2", "avx512", "avx512bf16", "amx")), active
    finally:
        tessera.set_isa(None)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.int64])
def test_same_bits_on_every_thread_count(rng, dtype):
    for shape in [(3, 257, 190), (1, 1100, 150)]:  # rows first, columns first
        x = random_bits(rng, shape, dtype)
        outs = []
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            outs.append(TR.batched_transpose(x).view(np.uint8).copy())
        tessera.set_num_threads(0)
        want = x.transpose(0, 2, 1).copy().view(np.uint8)
        assert all(np.array_equal(o, want) for o in outs), shape


def test_kernels_follow_set_isa():
    """A kernel built before tessera.set_isa is not reused after it: the cache key holds the level."""
    from tessera.tile_kernels import _kernels_transpose as K

    x = np.arange(6 * 40, dtype=np.float32).reshape(1, 6, 40)
    tessera.set_isa("scalar")
    try:
        TR.batched_transpose(x)
        assert "tlrt::transpose_block" not in K.batched_transpose("int32", "int32").get_kernel_source()
    finally:
        tessera.set_isa(None)
    best = tessera.cpu_info()["active_isa"]
    if best in ("avx2", "avx512", "avx512bf16", "amx"):
        assert "tlrt::transpose_block" in K.batched_transpose("int32", "int32").get_kernel_source()
    assert np.array_equal(TR.batched_transpose(x), x.transpose(0, 2, 1))
