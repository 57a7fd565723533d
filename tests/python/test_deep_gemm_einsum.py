"""deep_gemm.einsum and fp8_einsum (DeepGEMM's API, docs/gemm.md) against float64 references: the three bf16
expressions (accumulating fp32 and plain bf16 outputs, padded strides), the FP8 'bhr,hdr->bhd' with
per-token and per-block scales, not-implemented expressions, determinism and bad input."""
import numpy as np
import pytest

import tessera
from grouped_helpers import BF16, POISON, assert_same_bits_across_threads, bits, check_diff, f64, poisoned
from tessera import deep_gemm
from tessera.deep_gemm.testing import calc_diff


def padded_last_dim(rng, shape, pad=8):
    """bfloat16 random [..., r] stored inside [..., r + pad] (stride(-1) == 1, a larger stride(-2))."""
    full = rng.standard_normal(shape[:-1] + (shape[-1] + pad,)).astype(BF16)
    return full[..., :shape[-1]]


def check_bf16_einsum(z, ref, what):
    """DeepGEMM's bound for these expressions is calc_diff < 1e-10 against cuBLAS's bf16 result of
    the same fp32-accumulated product. Against float64 a bf16 output cannot get there (its own
    rounding gives ~1e-6); against the float64 value rounded to bf16 it holds while no element sits
    within fp32 accumulation noise of a bf16 rounding boundary - about 1e-4 of the elements at
    DeepGEMM's sizes (r = 512..4096) land one ulp off and give 1e-10..4e-10, as numpy's own fp32
    einsum does (4e-10..8e-10). So: < 1e-5 against float64, every element within one bf16 ulp of
    the rounded value, at most 1e-3 of them off; the calc_diff against the rounded value is printed."""
    rounded = ref.astype(np.float32).astype(BF16)
    diff, diff_rounded = calc_diff(z, ref), calc_diff(z, rounded)
    mismatch = np.mean(bits(z) != bits(rounded))
    print(f"{what}: diff={diff:.2e} vs bf16(float64)={diff_rounded:.2e} ({mismatch:.1e} of elements differ)")
    assert diff < 1e-5
    assert mismatch <= 1e-3
    ulp = np.ldexp(1.0, np.frexp(f64(rounded))[1] - 8)  # bf16 keeps 8 significant bits
    assert np.all(np.abs(f64(z) - f64(rounded)) <= ulp), f"{what}: an element is more than one bf16 ulp off"


@pytest.mark.parametrize("d_dtype", [np.float32, BF16])
def test_einsum_bmk_bnk_mn(rng, d_dtype):
    s, m, n, k = 5, 40, 24, 72
    a = rng.standard_normal((s, m, k)).astype(BF16)
    b = rng.standard_normal((s, n, k)).astype(BF16)
    product = np.einsum("smk,snk->mn", f64(a), f64(b))
    if d_dtype == np.float32:
        d = (rng.standard_normal((m, n)) * 4).astype(np.float32)
        ref = f64(d) + product
        assert deep_gemm.einsum("bmk,bnk->mn", a, b, d, c=d) is None
        check_diff(d, ref, ref, 1e-5, "einsum bmk,bnk->mn fp32 accumulate", deq_threshold=1e-10)
    else:
        d = poisoned((m, n))
        deep_gemm.einsum("bmk,bnk->mn", a, b, d)
        check_diff(d, product, product, 1e-5, "einsum bmk,bnk->mn bf16")


@pytest.mark.parametrize("b_size, h, r, d_size", [(4, 3, 160, 40), (33, 2, 64, 136)])
def test_einsum_bhr_hdr_bhd(rng, b_size, h, r, d_size):
    x = padded_last_dim(rng, (b_size, h, r))
    y = padded_last_dim(rng, (h, d_size, r))
    z = poisoned((b_size, h, d_size))
    deep_gemm.einsum("bhr,hdr->bhd", x, y, z, use_cublaslt=True)
    check_bf16_einsum(z, np.einsum("bhr,hdr->bhd", f64(x), f64(y)), f"bhr,hdr->bhd b={b_size} h={h} r={r} d={d_size}")


@pytest.mark.parametrize("b_size, h, r, d_size", [(4, 3, 160, 40), (33, 2, 64, 136)])
def test_einsum_bhd_hdr_bhr(rng, b_size, h, r, d_size):
    x = padded_last_dim(rng, (b_size, h, d_size))
    y = padded_last_dim(rng, (h, d_size, r))
    z = poisoned((b_size, h, r))
    deep_gemm.einsum("bhd,hdr->bhr", x, y, z)
    check_bf16_einsum(z, np.einsum("bhd,hdr->bhr", f64(x), f64(y)), f"bhd,hdr->bhr b={b_size} h={h} r={r} d={d_size}")


def test_einsum_is_bitwise_deterministic_across_threads(rng):
    x = rng.standard_normal((64, 4, 256)).astype(BF16)
    y = rng.standard_normal((4, 96, 256)).astype(BF16)
    z = poisoned((64, 4, 96))

    def call():
        z[...] = POISON
        deep_gemm.einsum("bhr,hdr->bhd", x, y, z)
        return z

    assert_same_bits_across_threads(call)


def test_einsum_rejects_bad_input(rng):
    a = rng.standard_normal((2, 8, 16)).astype(BF16)
    b = rng.standard_normal((2, 4, 16)).astype(BF16)
    d = np.full((8, 4), POISON, np.float32)
    before = bits(d).copy()
    with pytest.raises(ValueError, match="pass c=d"):
        deep_gemm.einsum("bmk,bnk->mn", a, b, d)  # an fp32 d accumulates: c must be d
    with pytest.raises((ValueError, NotImplementedError), match="bmk,bkn->mn"):
        deep_gemm.einsum("bmk,bkn->mn", a, b, d, c=d)
    with pytest.raises(ValueError, match="einsum"):
        deep_gemm.einsum("bhr,hdr->bhd", a, b, poisoned((2, 2, 4)))  # h is 8 in a, 2 in b
    np.testing.assert_array_equal(bits(d), before)
    with pytest.raises(TypeError, match="'expr' must be a str"):
        deep_gemm.einsum(None, a, b, d, c=d)


def fp8_einsum_problem(rng, b_size, h, r, d_size):
    x = rng.standard_normal((b_size, h, r)).astype(np.float32)
    y = rng.standard_normal((h, d_size, r)).astype(np.float32)
    qx, sfx = deep_gemm.per_token_cast_to_fp8(x.reshape(-1, r), use_ue8m0=False)
    deq_x = (f64(qx) * f64(sfx)[:, np.arange(r) // 128]).reshape(b_size, h, r)
    qy, sfy, deq_y = [], [], []
    for i in range(h):
        q, sf = deep_gemm.per_block_cast_to_fp8(y[i], use_ue8m0=False)
        qy.append(q)
        sfy.append(sf)
        deq_y.append(f64(q) * f64(sf)[np.arange(d_size) // 128][:, np.arange(r) // 128])
    a = (qx.reshape(b_size, h, r), sfx.reshape(b_size, h, -1))
    b = (np.stack(qy), np.stack(sfy))
    return a, b, np.einsum("bhr,hdr->bhd", f64(x), f64(y)), np.einsum("bhr,hdr->bhd", deq_x, np.stack(deq_y))


@pytest.mark.parametrize("d_dtype", [BF16, np.float32])
def test_fp8_einsum_bhr_hdr_bhd(rng, d_dtype):
    b_size, h, r, d_size = 6, 3, 320, 136
    a, b, ref, deq_ref = fp8_einsum_problem(rng, b_size, h, r, d_size)
    z = poisoned((b_size, h, d_size), d_dtype)
    assert deep_gemm.fp8_einsum("bhr,hdr->bhd", a, b, z) is None
    check_diff(z, ref, deq_ref, 1e-3, f"fp8_einsum bhr,hdr->bhd d={np.dtype(d_dtype).name}")


def test_fp8_einsum_rejects_unknown_expressions_and_bad_shapes(rng):
    # 'bhd,hdr->bhr' and 'bhd,bhr->hdr' are implemented (tests/python/test_deep_gemm_compat.py); an
    # unknown expression is not, and operands of the wrong shape are refused before d is written.
    a, b, _, _ = fp8_einsum_problem(rng, 2, 2, 128, 128)
    z = poisoned((2, 2, 128))
    before = bits(z).copy()
    with pytest.raises(tessera.NotImplementedInTessera, match="fp8_einsum"):
        deep_gemm.fp8_einsum("bhx,hdr->bhd", a, b, z)
    with pytest.raises(ValueError, match="fp8_einsum: argument 'a.scale' must have shape"):
        deep_gemm.fp8_einsum("bhd,bhr->hdr", a, b, z, recipe=(1, 1, 128))
    np.testing.assert_array_equal(bits(z), before)


def test_fp8_einsum_accumulates_into_c(rng):
    b_size, h, r, d_size = 3, 2, 256, 72
    a, b, ref, deq_ref = fp8_einsum_problem(rng, b_size, h, r, d_size)
    c = rng.standard_normal((b_size, h, d_size)).astype(np.float32)
    d = c.copy()
    assert deep_gemm.fp8_einsum("bhr,hdr->bhd", a, b, d, c=d) is None  # c is d: accumulate in place
    check_diff(d, ref + c, deq_ref + c, 1e-3, "fp8_einsum bhr,hdr->bhd c=d")
    z = poisoned((b_size, h, d_size), np.float32)
    deep_gemm.fp8_einsum("bhr,hdr->bhd", a, b, z, c=c)
    check_diff(z, ref + c, deq_ref + c, 1e-3, "fp8_einsum bhr,hdr->bhd separate c")
