"""TileLang's usual float16 GEMM (examples/tl/gemm.py with dtype="float16": fp16 A, B and C, float32
accumulator) and its float8-e5m2 form, against float64 on fresh random inputs with tails. fp16 products
are exact and summed in fp32 on every level (AMX as a bf16 hi/lo split), so C is within half an fp16 ulp
plus fp32 accumulation error; rounding the inputs to bf16 would miss that by far."""
import ml_dtypes
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache + examples on sys.path

import gemm


def f64(x):
    return np.asarray(x).astype(np.float64)


def check(got, want, magnitude, half_ulp_bits, what):
    bound = np.abs(want) * 2.0 ** -half_ulp_bits + 1e-5 * magnitude + 1e-30
    err = np.abs(f64(got) - want)
    bad = err > bound
    if bad.any():
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(f"{what}: {bad.sum()} of {err.size} out of bound; worst at {i}: got {f64(got)[i]}, "
                             f"want {want[i]}, bound {bound[i]}")


@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
@pytest.mark.parametrize("mnk", [(200, 100, 300), (1, 17, 5), (257, 129, 130)])
def test_fp16_gemm(rng, layout, mnk):
    m, n, k = mnk
    kernel = gemm.matmul(layout, relu=False, dtype="float16")
    a, b = gemm.make_inputs(m, n, k, layout, rng, dtype=np.float16)
    want = gemm.reference(a, b, layout, relu=False)
    magnitude = gemm.reference(np.abs(f64(a)), np.abs(f64(b)), layout, relu=False)
    c = kernel(a, b)
    assert c.dtype == np.float16
    check(c, want, magnitude, 11, f"fp16 gemm {layout} {mnk}")
    # The same operands rounded to bf16 first give a result outside that bound (what the split avoids).
    a16, b16 = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    with pytest.raises(AssertionError):
        check(gemm.reference(a16, b16, layout, relu=False).astype(np.float16), want, magnitude, 11, "bf16 inputs")


@pytest.mark.parametrize("layout", ["nt", "nn"])
def test_e5m2_gemm(rng, layout):
    m, n, k = 130, 70, 200
    kernel = gemm.matmul(layout, relu=False, dtype="float8_e5m2")
    a, b = gemm.make_inputs(m, n, k, layout, rng, dtype=ml_dtypes.float8_e5m2)
    want = gemm.reference(a, b, layout, relu=False)
    magnitude = gemm.reference(np.abs(f64(a)), np.abs(f64(b)), layout, relu=False)
    check(kernel(a, b), want, magnitude, 3, f"e5m2 gemm {layout}")  # C is e5m2: half an ulp is 2^-3
