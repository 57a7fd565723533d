"""The tile-language acceptance suite (examples/tl): every example kernel against a float64 reference on
fresh random inputs, including sizes that are not multiples of the tile."""
import ml_dtypes
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache + examples on sys.path

import elementwise_add
import flash_attention
import flash_decoding
import gemm
import gemm_splitk
import gemv_dequant
import rmsnorm
import softmax
import topk

BF16 = ml_dtypes.bfloat16


def f64(x):
    return np.asarray(x).astype(np.float64)


def assert_close(got, want, bound, what):
    """|got - want| <= bound element-wise; on failure reports the worst element."""
    err = np.abs(f64(got) - want)
    bound = np.broadcast_to(bound, err.shape)
    bad = err > bound
    if bad.any():
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(f"{what}: {bad.sum()} of {err.size} elements out of bound; worst at {i}: got "
                             f"{f64(got)[i]}, want {want[i]}, bound {bound[i]}")


def bf16_half_ulp(x):
    return np.abs(x) * 2.0 ** -8


@pytest.mark.parametrize("activation", ["relu", "silu", "gelu_tanh"])
@pytest.mark.parametrize("shape", [(1, 1), (37, 1000), (130, 513)])
def test_elementwise_add(rng, activation, shape):
    kernel = elementwise_add.elementwise_add(activation)
    a = rng.standard_normal(shape).astype(BF16)
    b = rng.standard_normal(shape).astype(BF16)
    want = elementwise_add.reference(a, b, activation)
    assert_close(kernel(a, b), want, bf16_half_ulp(want) + 1e-6, f"add+{activation} {shape}")


@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
@pytest.mark.parametrize("mnk", [(128, 128, 64), (200, 100, 300), (1, 17, 5), (257, 129, 130)])
def test_gemm_relu(rng, layout, mnk):
    m, n, k = mnk
    kernel = gemm.matmul(layout)
    a, b = gemm.make_inputs(m, n, k, layout, rng)
    want = gemm.reference(a, b, layout)
    magnitude = gemm.reference(np.abs(f64(a)), np.abs(f64(b)), layout, relu=False)
    assert_close(kernel(a, b), want, bf16_half_ulp(want) + 1e-5 * magnitude, f"gemm {layout} {mnk}")


@pytest.mark.parametrize("split_k", [1, 3])
@pytest.mark.parametrize("mnk", [(64, 64, 640), (100, 70, 1000), (5, 3, 77)])
def test_gemm_splitk_atomic_add(rng, split_k, mnk):
    m, n, k = mnk
    kernel = gemm_splitk.matmul_splitk(split_k)
    a = rng.standard_normal((m, k)).astype(BF16)
    b = rng.standard_normal((k, n)).astype(BF16)
    c = np.zeros((m, n), np.float32)
    kernel(a, b, c)
    magnitude = np.abs(f64(a)) @ np.abs(f64(b))
    assert_close(c, gemm_splitk.reference(a, b), 1e-5 * magnitude + 1e-6, f"split-K {split_k} {mnk}")


@pytest.mark.parametrize("n", [1, 100, 1000])
@pytest.mark.parametrize("k", [256, 1024])
def test_gemv_fp8(rng, n, k):
    w, s, x = gemv_dequant.make_fp8(n, k, rng)
    y = gemv_dequant.gemv_fp8(k)(w, s, x)
    deq = gemv_dequant.dequantize_fp8(w, s)
    want = deq @ f64(x)
    assert_close(y, want, 1e-5 * (np.abs(deq) @ np.abs(f64(x))) + 1e-6, f"fp8 gemv N={n} K={k}")


@pytest.mark.parametrize("n", [64, 1024])
@pytest.mark.parametrize("k", [128, 1024])
def test_gemv_fp8_tiled(rng, n, k):
    w, s, x = gemv_dequant.make_fp8(n, k, rng)
    wt, st = gemv_dequant.tile_fp8(w, s)
    y = gemv_dequant.gemv_fp8_tiled(k)(wt, st, x)
    assert y.shape == (n // 64, 64)
    deq = gemv_dequant.dequantize_fp8(w, s)
    want = deq @ f64(x)
    assert_close(y.reshape(-1), want, 1e-5 * (np.abs(deq) @ np.abs(f64(x))) + 1e-6, f"tiled fp8 gemv N={n} K={k}")
    # the row-major kernel gives the same bits: the same products summed in the same order
    assert np.array_equal(y.reshape(-1), gemv_dequant.gemv_fp8(k, block_N=64)(w, s, x))


@pytest.mark.parametrize("fmt", ["int4", "fp4"])
@pytest.mark.parametrize("n", [1, 100, 1000])
def test_gemv_4bit(rng, fmt, n):
    k = 512
    w, s, x = gemv_dequant.make_4bit(n, k, rng)
    y = gemv_dequant.gemv_4bit(k, fmt)(w, s, x)
    deq = gemv_dequant.dequantize_4bit(w, s, fmt)
    want = deq @ f64(x)
    assert_close(y, want, 1e-5 * (np.abs(deq) @ np.abs(f64(x))) + 1e-6, f"{fmt} gemv N={n} K={k}")


@pytest.mark.parametrize("n", [100, 1024])
@pytest.mark.parametrize("m", [1, 7, 300])
def test_rmsnorm(rng, m, n):
    x = rng.standard_normal((m, n)).astype(BF16)
    w = rng.standard_normal(n).astype(BF16)
    want = rmsnorm.reference(x, w)
    assert_close(rmsnorm.rms_norm(n)(x, w), want, bf16_half_ulp(want) + 1e-5, f"rmsnorm {m}x{n}")


@pytest.mark.parametrize("shape", [(1, 1), (5, 1000), (33, 3000), (4, 4096)])
def test_online_softmax(rng, shape):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    want = softmax.reference(x)
    assert_close(softmax.online_softmax()(x), want, 1e-5 * want + 1e-7, f"softmax {shape}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("groups", [1, 2])
def test_flash_attention(rng, causal, groups):
    batch, heads, seq_len, dim = 2, 4, 130, 64  # 130 = two 64-row tiles and a tail of 2
    kernel = flash_attention.flashattn(batch, heads, seq_len, dim, causal, groups)
    q, k, v = flash_attention.make_inputs(batch, heads, seq_len, dim, groups, rng)
    want = flash_attention.reference(q, k, v, causal, groups)
    got = kernel(q, k, v)
    # P is rounded to bf16 before P @ V (as on GPUs): errors of a few bf16 ulps of |V|
    assert_close(got, want, 2e-2 + bf16_half_ulp(want), f"flash attention causal={causal} groups={groups}")
    assert np.abs(f64(got) - want).mean() < 2e-3


@pytest.mark.parametrize("seqlen_kv,num_split", [(1000, 4), (10, 8)])
def test_flash_decoding(rng, seqlen_kv, num_split):
    batch, heads, heads_kv, dim = 2, 8, 2, 64
    kernel = flash_decoding.flash_decode(batch, heads, heads_kv, seqlen_kv, dim, num_split)
    q, k, v = flash_decoding.make_inputs(batch, heads, heads_kv, seqlen_kv, dim, rng)
    want = flash_decoding.reference(q, k, v)
    assert_close(flash_decoding.run(kernel, q, k, v, num_split), want, 2e-2 + bf16_half_ulp(want),
                 f"flash decoding seqlen {seqlen_kv} splits {num_split}")


@pytest.mark.parametrize("m", [1, 100, 1000])
def test_topk(rng, m):
    n, k = 64, 5
    logits = rng.standard_normal((m, n)).astype(np.float32)
    vals, idx = topk.topk(n, k)(logits)
    want_vals, want_idx = topk.reference(logits, k)
    np.testing.assert_array_equal(vals, want_vals)
    np.testing.assert_array_equal(idx, want_idx)
