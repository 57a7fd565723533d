"""deep_gemm.bf16_gemm_* and cublaslt_gemm_* against a float64 reference (DeepGEMM's threshold:
calc_diff < 1e-5), in every layout, operand major-ness and output dtype, with K tails (576, 2112),
padded leading strides, accumulation into c, c is d, empty dimensions and untouched memory around d."""
import numpy as np
import pytest

import tessera
from helpers import BF16, E4M3, LAYOUTS, bits, f64, given, poisoned, store
from tessera import deep_gemm
from tessera.deep_gemm.testing import calc_diff

SHAPES = [(1, 64, 576), (7, 129, 2112), (129, 200, 576)]


def bf16_problem(rng, m, n, k):
    a = rng.standard_normal((m, k), dtype=np.float32).astype(BF16)
    b = rng.standard_normal((n, k), dtype=np.float32).astype(BF16)
    return a, b, f64(a) @ f64(b).T


def operands(layout, a, b, a_major="row", b_major="row", pad=0):
    return (store(given(a, layout[0], True), a.dtype, a_major, pad),
            store(given(b, layout[1], False), b.dtype, b_major, pad))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("a_major, b_major", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
@pytest.mark.parametrize("m, n, k", SHAPES)
@pytest.mark.parametrize("d_dtype", [BF16, np.float32])
def test_bf16_gemm_every_layout(rng, layout, a_major, b_major, m, n, k, d_dtype):
    a, b, ref = bf16_problem(rng, m, n, k)
    ga, gb = operands(layout, a, b, a_major, b_major)
    d = poisoned((m, n), d_dtype)
    assert getattr(deep_gemm, f"bf16_gemm_{layout}")(ga, gb, d) is None
    diff = calc_diff(d, ref)
    print(f"bf16_gemm_{layout} a={a_major} b={b_major} m={m} n={n} k={k} d={np.dtype(d_dtype).name}: diff={diff:.2e}")
    assert diff < 1e-5


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bf16_gemm_padded_leading_strides(rng, layout):
    m, n, k = 33, 70, 2112
    a, b, ref = bf16_problem(rng, m, n, k)
    ga, gb = operands(layout, a, b, "row", "col", pad=5)
    assert ga.strides[0] == (ga.shape[1] + 5) * 2 and gb.strides[1] == (gb.shape[0] + 5) * 2  # genuinely padded
    d = poisoned((m, n), np.float32)
    getattr(deep_gemm, f"bf16_gemm_{layout}")(ga, gb, d)
    assert calc_diff(d, ref) < 1e-5


@pytest.mark.parametrize("d_dtype", [BF16, np.float32])
def test_bf16_gemm_accumulates_c(rng, d_dtype):
    m, n, k = 45, 96, 576
    a, b, ref = bf16_problem(rng, m, n, k)
    c = rng.standard_normal((m, n), dtype=np.float32).astype(d_dtype)
    d = poisoned((m, n), d_dtype)
    deep_gemm.bf16_gemm_nt(a, b, d, c=c)
    assert calc_diff(d, f64(c) + ref) < 1e-5


def test_bf16_gemm_c_is_d_accumulates_in_place(rng):
    m, n, k = 45, 96, 576
    a, b, ref = bf16_problem(rng, m, n, k)
    d = rng.standard_normal((m, n), dtype=np.float32)
    expected = f64(d) + ref
    deep_gemm.bf16_gemm_nt(a, b, d, c=d)
    assert calc_diff(d, expected) < 1e-5
    np.testing.assert_allclose(d, expected, rtol=1e-5, atol=1e-4)


def test_bf16_gemm_writes_d_only(rng):
    m, n, k = 17, 40, 576
    a, b, ref = bf16_problem(rng, m, n, k)
    big = poisoned((m + 2, n + 9), np.float32)
    before = big.copy()
    d = big[1:m + 1, 3:n + 3]
    deep_gemm.bf16_gemm_nt(a, b, d)
    outside = np.ones_like(big, dtype=bool)
    outside[1:m + 1, 3:n + 3] = False
    np.testing.assert_array_equal(bits(big)[outside], bits(before)[outside])
    assert calc_diff(d, ref) < 1e-5


def test_bf16_gemm_empty_dimensions(rng):
    a, b, _ = bf16_problem(rng, 0, 8, 64)
    deep_gemm.bf16_gemm_nt(a, b, np.empty((0, 8), np.float32))  # m == 0: nothing to do
    a, b, _ = bf16_problem(rng, 4, 0, 64)
    deep_gemm.bf16_gemm_nt(a, b, np.empty((4, 0), np.float32))  # n == 0
    a, b, _ = bf16_problem(rng, 4, 8, 0)
    d = poisoned((4, 8), np.float32)
    deep_gemm.bf16_gemm_nt(a, b, d)  # k == 0 without c: zeros
    np.testing.assert_array_equal(d, np.zeros((4, 8), np.float32))
    c = rng.standard_normal((4, 8), dtype=np.float32)
    deep_gemm.bf16_gemm_nt(a, b, d, c=c)  # k == 0 with c: d = c
    np.testing.assert_array_equal(d, c)


def test_bf16_gemm_is_bitwise_repeatable_across_thread_counts(rng):
    a, b, _ = bf16_problem(rng, 129, 200, 2112)
    results = []
    try:
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            d = poisoned((129, 200), np.float32)
            deep_gemm.bf16_gemm_nt(a, b, d)
            results.append(bits(d))
    finally:
        tessera.set_num_threads(0)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("m, n, k", [(97, 640, 2500), (98, 300, 1300), (99, 400, 1200), (100, 330, 1500), (52, 1060, 1100), (66, 500, 1100)])
def test_bf16_gemm_thin_tail_panels(rng, layout, m, n, k):
    """Shapes whose last column panel holds 1-8 columns, which the AVX512_BF16 driver computes as dot
    products along K (several K chunks and a K tail here): float64 reference, c accumulation, and the
    same bits for 1, 2 and 3 threads."""
    a, b, ref = bf16_problem(rng, m, n, k)
    ga, gb = operands(layout, a, b)
    c = rng.standard_normal((m, n), dtype=np.float32)
    results = []
    try:
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            d = poisoned((m, n), np.float32)
            getattr(deep_gemm, f"bf16_gemm_{layout}")(ga, gb, d, c=c)
            results.append(bits(d))
    finally:
        tessera.set_num_threads(0)
    diff = calc_diff(d, f64(c) + ref)
    print(f"bf16_gemm_{layout} thin tail m={m} n={n} k={k}: diff={diff:.2e}")
    assert diff < 1e-5
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_scalar_reference_path_agrees_with_the_fast_path(rng):
    a, b, ref = bf16_problem(rng, 65, 96, 576)
    fast, scalar = poisoned((65, 96), np.float32), poisoned((65, 96), np.float32)
    deep_gemm.bf16_gemm_nt(a, b, fast)
    try:
        tessera.set_isa("scalar")
        deep_gemm.bf16_gemm_nt(a, b, scalar)
    finally:
        tessera.set_isa(None)
    np.testing.assert_allclose(scalar, fast, rtol=1e-5, atol=1e-4)
    assert calc_diff(scalar, ref) < 1e-5


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cublaslt_gemm_bf16(rng, layout):
    a, b, ref = bf16_problem(rng, 31, 72, 576)
    ga, gb = operands(layout, a, b, "row", "col")
    d = poisoned((31, 72), BF16)
    assert getattr(deep_gemm, f"cublaslt_gemm_{layout}")(ga, gb, d) is None
    assert calc_diff(d, ref) < 1e-5


def test_cublaslt_gemm_raw_fp8_operands(rng):
    a = (rng.standard_normal((31, 576), dtype=np.float32) * 8).astype(E4M3)
    b = (rng.standard_normal((72, 576), dtype=np.float32) * 8).astype(E4M3)
    d = poisoned((31, 72), np.float32)
    c = rng.standard_normal((31, 72), dtype=np.float32)
    deep_gemm.cublaslt_gemm_nt(a, b, d, c=c)
    assert calc_diff(d, f64(c) + f64(a) @ f64(b).T) < 1e-5


def test_compiled_dims_is_accepted_and_ignored(rng):
    a, b, ref = bf16_problem(rng, 8, 16, 128)
    d = poisoned((8, 16), np.float32)
    deep_gemm.bf16_gemm_tn(store(a.T, BF16), store(b.T, BF16), d, compiled_dims="")
    assert calc_diff(d, ref) < 1e-5
    with pytest.raises(TypeError, match="compiled_dims"):
        deep_gemm.bf16_gemm_nt(a, b, d, compiled_dims=3)


def test_signature_defaults_follow_deepgemm():
    import inspect
    for layout, dims in (("nt", "nk"), ("nn", "nk"), ("tn", "mn"), ("tt", "mn")):
        params = inspect.signature(getattr(deep_gemm, f"bf16_gemm_{layout}")).parameters
        assert list(params) == ["a", "b", "d", "c", "compiled_dims"]
        assert params["c"].default is None and params["compiled_dims"].default == dims
        assert list(inspect.signature(getattr(deep_gemm, f"cublaslt_gemm_{layout}")).parameters) == ["a", "b", "d", "c"]
