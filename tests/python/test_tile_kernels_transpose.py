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
