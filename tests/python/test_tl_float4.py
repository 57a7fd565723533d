"""float4 e2m1 in the tile language: on-chip buffers hold a code per byte, global tensors are packed two
codes per byte (element 2i in the low nibble, as TileKernels' and DeepGEMM's FP4). Stores are checked
bit for bit against ml_dtypes' rounding (ties to even, saturated at +-6, NaN -> 0) at every rounding
boundary; loads decode every code; stores that start on an odd element rewrite only their nibbles;
row-strided packed tensors, masked tails and the scalar level are covered too."""
import platform

import ml_dtypes
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.tl
import tessera.language as T

E2M1 = np.dtype(ml_dtypes.float4_e2m1fn)


def expected_codes(x):
    """ml_dtypes' codes of x saturated at +-6; NaN gives code 0 (e2m1 has no NaN)."""
    x = np.asarray(x, np.float32)
    codes = np.clip(x, -6, 6).astype(E2M1).view(np.uint8) & 15
    codes[np.isnan(x)] = 0
    return codes


def pack(codes):
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8).view(np.int8)


def unpack(packed):
    b = np.asarray(packed).view(np.uint8)
    codes = np.empty(b.shape[:-1] + (2 * b.shape[-1],), np.uint8)
    codes[..., 0::2], codes[..., 1::2] = b & 15, b >> 4
    return codes


def values(codes):
    return codes.view(E2M1).astype(np.float32)


def store_direct():
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((m, n), "float32"), y: T.Tensor((m, n), T.float4_e2m1fn)):
        with T.Kernel(m) as row:
            for j in T.Parallel(n):
                y[row, j] = x[row, j]
    return main


def store_through_shared(block=32):
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((m, n), "float32"), y: T.Tensor((m, n), T.float4_e2m1fn)):
        with T.Kernel(T.ceildiv(n, block), m) as (bx, row):
            tile = T.alloc_shared((1, block), T.float4_e2m1fn)
            T.copy(x[row, bx * block], tile)
            T.copy(tile, y[row, bx * block])
    return main


def load_through_fragment(block=32):
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def main(y: T.Tensor((m, n), T.float4_e2m1fn), z: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(n, block), m) as (bx, row):
            tile = T.alloc_fragment((1, block), T.float4_e2m1fn)
            T.copy(y[row, bx * block], tile)
            T.copy(tile, z[row, bx * block])
    return main


def store_at_odd_columns(n):
    """Writes columns 1 .. n-2 of each row: every vector starts on an odd element."""
    m = T.dynamic("m")

    @T.prim_func
    def main(x: T.Tensor((m, n), "float32"), y: T.Tensor((m, n), T.float4_e2m1fn)):
        with T.Kernel(m) as row:
            for j in T.Parallel(n - 2):
                y[row, j + 1] = x[row, j + 1] * 0.5
    return main


_KERNELS = {}


def kernel(builder, *args, isa=None, out_idx=-1):
    """builder(*args) compiled for the host, or for the level isa caps it to (compiled once)."""
    key = (builder.__name__, args, isa, out_idx)
    if key not in _KERNELS:
        tessera.set_isa(isa)
        try:
            _KERNELS[key] = tessera.tl.compile(builder(*args), out_idx=out_idx)
        finally:
            tessera.set_isa(None)
    return _KERNELS[key]


def boundary_values():
    """Every e2m1 magnitude, the midpoints between neighbours and the float32 values one ulp around each."""
    finite = np.unique(np.abs(values(np.arange(16, dtype=np.uint8))))
    mids = (finite[:-1] + finite[1:]) / 2
    points = np.concatenate([finite, mids, [6.5, 7.0, 8.0, 1e-30]]).astype(np.float32)
    around = np.concatenate([points, np.nextafter(points, np.float32(np.inf)), np.nextafter(points, np.float32(0))])
    return np.concatenate([around, -around])


@pytest.mark.parametrize("isa", [None, "avx2", "scalar"])
@pytest.mark.parametrize("builder", [store_direct, store_through_shared])
def test_stores_round_like_ml_dtypes_at_every_boundary(builder, isa):
    if isa == "avx2" and platform.machine() not in ("x86_64", "AMD64"):
        isa = "neon"
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 3e38, 6.0, -6.0], np.float32)
    x = np.concatenate([boundary_values(), specials])
    x = np.concatenate([x, np.zeros(-len(x) % 2, np.float32)]).reshape(2, -1)  # two rows, odd halves
    got = kernel(builder, isa=isa)(x)
    assert got.dtype == np.int8 and got.shape == (2, x.shape[1] // 2)
    np.testing.assert_array_equal(unpack(got), expected_codes(x))


@pytest.mark.parametrize("shape", [(1, 2), (3, 30), (5, 70), (4, 258)])
def test_random_rows_with_tails(rng, shape):
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, size=shape))).astype(np.float32)
    for builder in (store_direct, store_through_shared):
        np.testing.assert_array_equal(kernel(builder)(x), pack(expected_codes(x)))


def test_loads_decode_every_code_from_a_row_strided_tensor(rng):
    codes = rng.integers(0, 16, size=(6, 84)).astype(np.uint8)
    wide = rng.integers(-128, 128, size=(6, 64)).astype(np.int8)  # rows of 64 bytes, 42 of them used
    wide[:, :42] = pack(codes)
    z = kernel(load_through_fragment)(wide[:, :42])
    np.testing.assert_array_equal(z, values(codes))


def test_stores_at_odd_elements_leave_the_neighbouring_nibbles(rng):
    n = 53 * 2
    x = rng.uniform(-8, 8, size=(3, n)).astype(np.float32)
    y = rng.integers(-128, 128, size=(3, n // 2)).astype(np.int8)  # poisoned: codes outside 1..n-2 must stay
    before = unpack(y)
    kernel(store_at_odd_columns, n, out_idx=None)(x, y)
    after = unpack(y)
    np.testing.assert_array_equal(after[:, 1:-1], expected_codes(x[:, 1:-1] * 0.5))
    np.testing.assert_array_equal(after[:, [0, -1]], before[:, [0, -1]])


def test_bad_arguments_are_refused_with_the_rule():
    x = np.zeros((2, 6), np.float32)
    with pytest.raises(ValueError, match="argument 'y' must have dtype float4_e2m1"):
        kernel(store_at_odd_columns, 6, out_idx=None)(x, np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="dimension 1 must be 6, got 8"):
        kernel(store_at_odd_columns, 6, out_idx=None)(x, np.zeros((2, 4), np.int8))
    with pytest.raises(ValueError, match="packed float4 tensor needs an even last dimension"):
        kernel(store_direct)(np.zeros((2, 5), np.float32))


def gemm_of_float4_tiles():
    @T.prim_func
    def main(a: T.Tensor((16, 32), T.float4_e2m1fn), b: T.Tensor((32, 16), "bfloat16"),
             c: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as _:
            a_s = T.alloc_shared((16, 32), T.float4_e2m1fn)
            b_s = T.alloc_shared((32, 16), "bfloat16")
            acc = T.alloc_fragment((16, 16), "float32")
            T.copy(a[0, 0], a_s)
            T.copy(b[0, 0], b_s)
            T.clear(acc)
            T.gemm(a_s, b_s, acc)
            T.copy(acc, c[0, 0])
    return main


def test_gemm_of_float4_tiles_matches_float64(rng):
    """The micro-kernels refuse float4 operands; the reference lowering's loops run it."""
    codes = rng.integers(0, 16, size=(16, 32)).astype(np.uint8)
    b = rng.standard_normal((32, 16)).astype(ml_dtypes.bfloat16)
    c = np.full((16, 16), np.nan, np.float32)
    kernel(gemm_of_float4_tiles, out_idx=None)(pack(codes), b, c)
    want = values(codes).astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
