"""deep_gemm.fp8_fp4_gemm_* / fp8_gemm_* with both scale-factor styles (float32, packed UE8M0 int32),
every layout, K tails, padded strides, c accumulation and c is d.

Two references: the unquantised product in float64 (DeepGEMM's test, threshold 1e-3), and the product
of the dequantised operands (q * sf) in float64, which the kernel must match up to the one rounding of
d (threshold 1e-5) - this second check catches scale-factor indexing mistakes the first one tolerates."""
import inspect
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tessera
from helpers import BF16, LAYOUTS, bits, f64, given, poisoned, store
from tessera import deep_gemm
from tessera.deep_gemm.testing import calc_diff


def quantised_problem(rng, m, n, k, sf_style):
    """Per-token A (1x128) and per-block B (128x128), as DeepGEMM's tests make them. Returns
    ((qa, sfa), (qb, sfb)) ready for the nt GEMM, the unquantised and the dequantised references."""
    x = rng.standard_normal((m, k), dtype=np.float32)
    y = rng.standard_normal((n, k), dtype=np.float32)
    ue8m0 = sf_style == "ue8m0"
    qa, sfa = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=ue8m0)
    qb, sfb = deep_gemm.per_block_cast_to_fp8(y, use_ue8m0=ue8m0)
    cols = np.arange(k) // 128
    deq_a = f64(qa) * f64(sfa)[:, cols]
    deq_b = f64(qb) * f64(sfb)[np.arange(n) // 128][:, cols]
    if ue8m0:
        sfa = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sfa)
        sfb = deep_gemm.transform_sf_into_required_layout(sfb, n, k, (1, 128, 128), is_sfa=False)
        assert sfa.dtype == np.int32 and sfb.shape == (n, ((k + 127) // 128 + 3) // 4)
    return (qa, sfa), (qb, sfb), f64(x) @ f64(y).T, deq_a @ deq_b.T


def given_pair(pair, letter, is_a, major="row", pad=0):
    """(data, sf) of an operand as the layout letter gives it; SFs are transposed with their data."""
    data, sf = pair
    return store(given(data, letter, is_a), data.dtype, major, pad), given(sf, letter, is_a)


def check(d, ref, deq_ref, what):
    diff, diff_deq = calc_diff(d, ref), calc_diff(d, deq_ref)
    print(f"{what}: diff={diff:.2e} vs dequantised={diff_deq:.2e}")
    assert diff < 1e-3
    assert diff_deq < 1e-5


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sf_style", ["fp32", "ue8m0"])
@pytest.mark.parametrize("m, n, k", [(1, 256, 2112), (7, 129, 576), (129, 200, 576)])
@pytest.mark.parametrize("d_dtype", [BF16, np.float32])
def test_fp8_gemm_every_layout_and_sf_style(rng, layout, sf_style, m, n, k, d_dtype):
    a, b, ref, deq_ref = quantised_problem(rng, m, n, k, sf_style)
    ga = given_pair(a, layout[0], True, "row")
    gb = given_pair(b, layout[1], False, "col" if layout[1] == "n" else "row")
    d = poisoned((m, n), d_dtype)
    assert getattr(deep_gemm, f"fp8_fp4_gemm_{layout}")(ga, gb, d) is None
    check(d, ref, deq_ref, f"fp8_fp4_gemm_{layout} {sf_style} m={m} n={n} k={k} d={np.dtype(d_dtype).name}")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_fp8_gemm_mn_major_operands_with_padding(rng, layout):
    m, n, k = 40, 136, 2112
    a, b, ref, deq_ref = quantised_problem(rng, m, n, k, "fp32")
    ga = given_pair(a, layout[0], True, "col", pad=3)
    gb = given_pair(b, layout[1], False, "col", pad=7)
    d = poisoned((m, n), np.float32)
    getattr(deep_gemm, f"fp8_gemm_{layout}")(ga, gb, d)
    check(d, ref, deq_ref, f"fp8_gemm_{layout} MN-major padded")


@pytest.mark.parametrize("sf_style", ["fp32", "ue8m0"])
def test_fp8_gemm_accumulates_c_and_c_is_d(rng, sf_style):
    m, n, k = 33, 256, 576
    a, b, ref, deq_ref = quantised_problem(rng, m, n, k, sf_style)
    c = rng.standard_normal((m, n), dtype=np.float32) * 10
    d = poisoned((m, n), np.float32)
    deep_gemm.fp8_gemm_nt(a, b, d, c=c)
    check(d, f64(c) + ref, f64(c) + deq_ref, f"fp8 c accumulate {sf_style}")
    d2 = c.copy()
    deep_gemm.fp8_gemm_nt(a, b, d2, c=d2)
    check(d2, f64(c) + ref, f64(c) + deq_ref, f"fp8 c is d {sf_style}")
    np.testing.assert_array_equal(d2, d)


def test_explicit_recipes_match_the_defaults(rng):
    m, n, k = 20, 130, 576
    a, b, ref, deq_ref = quantised_problem(rng, m, n, k, "fp32")
    by_default, by_recipe, by_pairs = (poisoned((m, n), np.float32) for _ in range(3))
    deep_gemm.fp8_gemm_nt(a, b, by_default)
    deep_gemm.fp8_gemm_nt(a, b, by_recipe, recipe=(1, 128, 128))
    deep_gemm.fp8_gemm_nt(a, b, by_pairs, recipe_a=(1, 128), recipe_b=(128, 128))
    np.testing.assert_array_equal(by_recipe, by_default)
    np.testing.assert_array_equal(by_pairs, by_default)
    check(by_default, ref, deq_ref, "fp8 explicit recipes")


def pack_fp4(codes: np.ndarray) -> np.ndarray:
    """[R, K] e2m1 codes (0..15) -> int8 [R, K/2], element 2i in the low nibble (DeepGEMM's packing)."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)


def test_fp8_times_packed_fp4(rng):
    m, n, k = 9, 64, 256
    x = rng.standard_normal((m, k), dtype=np.float32)
    qa, sfa = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=True)
    codes = rng.integers(0, 16, size=(n, k), dtype=np.uint8)
    qb = pack_fp4(codes)
    sfb = (2.0 ** rng.integers(-3, 3, size=(n, k // 32))).astype(np.float32)  # one scale per 1x32 block
    values_b = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64) * f64(sfb)[:, np.arange(k) // 32]
    deq_ref = (f64(qa) * f64(sfa)[:, np.arange(k) // 128]) @ values_b.T
    d = poisoned((m, n), np.float32)
    deep_gemm.fp8_fp4_gemm_nt((qa, sfa), (qb, sfb), d, recipe_a=(1, 128), recipe_b=(1, 32))
    diff = calc_diff(d, deq_ref)
    print(f"fp8 x fp4: diff vs dequantised={diff:.2e}")
    assert diff < 1e-5


# Weight-scale exponent sets: the FP4 GEMVs take 1..254 (vector) and 64..190 (AMX tiles, M >= 4); a
# problem with an exponent outside a kernel's range goes to the next kernel (vector, then packed).
FP4_EXPONENT_SETS = {
    "extreme": [0, 1, 127, 160],  # 0: only the packed path
    "low edge of the tile range": [64, 65, 66],
    "high edge of the tile range": [188, 189, 190],
    "just below the tile range": [63, 100],
    "just above the tile range": [150, 191],
}


@pytest.mark.parametrize("m", [1, 4, 5, 8, 9])
@pytest.mark.parametrize("exponents", ["typical", *FP4_EXPONENT_SETS])
def test_fp8_times_packed_ue8m0_fp4_at_decode_sizes(rng, m, exponents):
    """Decode sizes take an FP4 GEMV (vector, or AMX tiles from M = 4 on AMX machines); exponents
    outside a kernel's range must give the same answers through the next one (M=9: packed)."""
    n, k = 96, 640  # K: five 128-steps, the last one partly a tail of the activation groups
    x = rng.standard_normal((m, k), dtype=np.float32)
    codes = rng.integers(0, 16, size=(n, k), dtype=np.uint8)
    if exponents == "typical":
        e = rng.integers(120, 134, size=(n, k // 32)).astype(np.uint8)
    else:
        e = rng.choice(np.array(FP4_EXPONENT_SETS[exponents], np.uint8), size=(n, k // 32))
    qa, sfa = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=True)
    sfb = (2.0 ** (e.astype(np.float64) - 127)).astype(np.float32)
    packed = np.zeros((n, -(-(k // 32) // 4) * 4), np.uint8)
    packed[:, :k // 32] = e
    values_b = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64) * f64(sfb)[:, np.arange(k) // 32]
    deq_ref = (f64(qa) * f64(sfa)[:, np.arange(k) // 128]) @ values_b.T
    d = poisoned((m, n), np.float32)
    deep_gemm.fp8_fp4_gemm_nt((qa, sfa), (pack_fp4(codes), packed.view(np.int32)), d, recipe_a=(1, 128),
                              recipe_b=(1, 32))
    diff = calc_diff(d, deq_ref)
    print(f"fp8 x fp4 (packed ue8m0, {exponents} exponents) m={m}: diff vs dequantised={diff:.2e}")
    assert np.all(np.isfinite(d)) and diff < 1e-5


def per32_fp8_times_fp4(rng, m, n, k):
    """FP8 activations with power-of-two scales per 32 K-values (Mega MoE's re-quantisation) times
    UE8M0-packed FP4 weights: the operands, and the float64 product of their dequantised values."""
    x = rng.standard_normal((m, k), dtype=np.float32)
    qa, sfa = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=True, gran_k=32)
    codes = rng.integers(0, 16, size=(n, k), dtype=np.uint8)
    e = rng.integers(120, 134, size=(n, k // 32)).astype(np.uint8)
    packed = np.zeros((n, -(-(k // 32) // 4) * 4), np.uint8)
    packed[:, :k // 32] = e
    values_b = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64) * 2.0 ** (f64(e) - 127)[:, np.arange(k) // 32]
    deq_ref = (f64(qa) * f64(sfa)[:, np.arange(k) // 32]) @ values_b.T
    return (qa, sfa), (pack_fp4(codes), packed.view(np.int32)), deq_ref


@pytest.mark.parametrize("m", [1, 3, 8])
def test_fp8_per32_scales_times_fp4_at_decode_sizes(rng, m):
    """Per-32 power-of-two activation scales fold exactly into bf16 activations for the FP4 GEMVs."""
    n, k = 80, 736  # K: not a multiple of 128
    a, b, deq_ref = per32_fp8_times_fp4(rng, m, n, k)
    d = poisoned((m, n), np.float32)
    deep_gemm.fp8_fp4_gemm_nt(a, b, d, recipe_a=(1, 32), recipe_b=(1, 32))
    diff = calc_diff(d, deq_ref)
    print(f"fp8 (1,32) x fp4 m={m}: diff vs dequantised={diff:.2e}")
    assert np.all(np.isfinite(d)) and diff < 1e-5


PER32_CHILD = """
import numpy as np
from tessera import deep_gemm
import test_deep_gemm_fp8 as t
a, b, _ = t.per32_fp8_times_fp4(np.random.default_rng(1), 4, 64, 512)
deep_gemm.fp8_fp4_gemm_nt(a, b, np.zeros((4, 64), np.float32), recipe_a=(1, 32), recipe_b=(1, 32))
"""


def test_fp8_per32_scales_take_an_fp4_gemv():
    """The decode call streams the FP4 weights through a GEMV rather than widening them to bf16 panels."""
    env = dict(os.environ, TESSERA_VERBOSE_DISPATCH="1", PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", PER32_CHILD], env=env, capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(os.path.abspath(__file__)))
    assert r.returncode == 0, r.stderr
    chosen = [line for line in r.stderr.splitlines() if "fp8_fp4_gemm_nt" in line and line.endswith("chosen")]
    assert chosen and "gemv_fp4" in chosen[0], r.stderr


@pytest.mark.parametrize("sf_style", ["fp32", "ue8m0"])
@pytest.mark.parametrize("m, n, k", [(97, 640, 2500), (98, 300, 1300), (99, 400, 1200), (100, 330, 1500),
                                     (66, 500, 1100), (52, 1060, 1100)])
def test_fp8_gemm_thin_tail_panels(rng, sf_style, m, n, k):
    """Shapes whose last column panel holds 1-8 columns (computed as scaled dot products along K, in
    lane order for these recipes): both references, and the same bits for 1, 2 and 3 threads."""
    a, b, ref, deq_ref = quantised_problem(rng, m, n, k, sf_style)
    results = []
    try:
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            d = poisoned((m, n), np.float32)
            deep_gemm.fp8_gemm_nt(a, b, d)
            results.append(bits(d))
    finally:
        tessera.set_num_threads(0)
    check(d, ref, deq_ref, f"fp8 thin tail {sf_style} m={m} n={n} k={k}")
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_legacy_gemm_fp8_fp8_bf16_nt(rng):
    m, n, k = 16, 128, 576
    a, b, ref, deq_ref = quantised_problem(rng, m, n, k, "fp32")
    out = poisoned((m, n), BF16)
    assert deep_gemm.gemm_fp8_fp8_bf16_nt(a, b, out) is None
    check(out, ref, deq_ref, "gemm_fp8_fp8_bf16_nt")
    with pytest.raises(ValueError, match="gemm_fp8_fp8_bf16_nt: argument 'out' must have dtype bfloat16"):
        deep_gemm.gemm_fp8_fp8_bf16_nt(a, b, np.zeros((m, n), np.float32))


def test_aliases_and_signatures_follow_deepgemm():
    for layout, dims in (("nt", "nk"), ("nn", "nk"), ("tn", "mn"), ("tt", "mn")):
        fn = getattr(deep_gemm, f"fp8_fp4_gemm_{layout}")
        assert getattr(deep_gemm, f"fp8_gemm_{layout}") is fn
        params = inspect.signature(fn).parameters
        assert list(params) == ["a", "b", "d", "c", "recipe", "recipe_a", "recipe_b", "compiled_dims",
                                "disable_ue8m0_cast"]
        assert params["compiled_dims"].default == dims and params["disable_ue8m0_cast"].default is False
        assert all(params[p].default is None for p in ("c", "recipe", "recipe_a", "recipe_b"))
