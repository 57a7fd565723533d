"""Bad inputs to deep_gemm GEMMs: each raises an error catchable as ValueError AND RuntimeError (DeepGEMM
raises RuntimeError for failed preconditions), carrying the native message that names the function, the
argument and the rule - and leaves d untouched."""
import numpy as np
import pytest

import tessera
from helpers import BF16, bits, poisoned
from tessera import deep_gemm


def expect_invalid(call, d, pattern):
    """Runs call() expecting InvalidArgumentError matching pattern, caught once as ValueError and once
    as RuntimeError; d must keep its bits."""
    before = bits(d).copy()
    with pytest.raises(ValueError, match=pattern) as as_value:
        call()
    with pytest.raises(RuntimeError, match=pattern):
        call()
    assert isinstance(as_value.value, tessera.InvalidArgumentError)
    np.testing.assert_array_equal(bits(d), before)
    print(f"{type(as_value.value).__name__}: {as_value.value}")


@pytest.fixture
def bf16_args(rng):
    a = rng.standard_normal((8, 64), dtype=np.float32).astype(BF16)
    b = rng.standard_normal((16, 64), dtype=np.float32).astype(BF16)
    return a, b, poisoned((8, 16), np.float32)


def test_wrong_operand_dtype(bf16_args):
    a, b, d = bf16_args
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a.astype(np.float32), b, d), d,
                   r"bf16_gemm_nt: argument 'a' must have dtype bfloat16, got float32")


def test_k_mismatch(bf16_args):
    a, b, d = bf16_args
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b[:, :48], d), d, r"bf16_gemm_nt: 'a' and 'b' must share K")


def test_wrong_output_shape_and_dtype(bf16_args):
    a, b, d = bf16_args
    wrong = poisoned((8, 15), np.float32)
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b, wrong), wrong, r"argument 'd' must have shape \[M, N\]")
    as_int = np.zeros((8, 16), np.int32)
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b, as_int), as_int, r"argument 'd' must have dtype")


def test_column_major_output(bf16_args):
    a, b, _ = bf16_args
    d = np.asfortranarray(poisoned((8, 16), np.float32))
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b, d), d, r"argument 'd' must be row-major")


def test_operand_neither_k_nor_mn_major(bf16_args):
    a, b, d = bf16_args
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a[:, ::2], b[:, ::2], d), d,
                   r"argument 'a' must have stride\(-1\) == 1 or stride\(-2\) == 1")


def test_c_with_wrong_dtype_or_shape(bf16_args):
    a, b, d = bf16_args
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b, d, c=np.zeros((8, 16), BF16)), d,
                   r"argument 'c' must have the dtype of 'd'")
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b, d, c=np.zeros((8, 17), np.float32)), d,
                   r"argument 'c' must have the shape of 'd'")


def test_output_overlapping_an_input(rng):
    buf = np.zeros((16, 64), np.float32)
    a = rng.standard_normal((8, 64), dtype=np.float32).astype(BF16)
    b_from_d = buf[:, :64].view(BF16)[:, :64]  # b lives in d's memory
    d = buf[:8, :16]
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b_from_d, d), d, r"output 'd' must not overlap input 'b'")


def test_unknown_dtype_and_odd_byte_strides_are_caught_before_cpp(bf16_args):
    a, b, d = bf16_args
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b.astype(np.complex64), d), d,
                   r"bf16_gemm_nt: argument 'b' has unsupported dtype complex64")
    raw = np.zeros(8 * 129 + 2, np.uint8)
    odd = np.ndarray((8, 64), dtype=BF16, buffer=raw, offset=1, strides=(129, 2))
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(odd, b, d), d,
                   r"bf16_gemm_nt: argument 'a' has a byte stride of 129 in dimension 0")


def test_read_only_output(bf16_args):
    a, b, d = bf16_args
    d.flags.writeable = False
    expect_invalid(lambda: deep_gemm.bf16_gemm_nt(a, b, d), d, r"argument 'd' is an output and must be writable")


def test_non_array_arguments_raise_type_error(bf16_args):
    a, b, d = bf16_args
    with pytest.raises(TypeError, match="bf16_gemm_nt: argument 'b' must be a numpy array"):
        deep_gemm.bf16_gemm_nt(a, b.tolist(), d)
    with pytest.raises(TypeError, match="fp8_fp4_gemm_nt: argument 'a' must be a \\(data, scale_factors\\) pair"):
        deep_gemm.fp8_fp4_gemm_nt(a, (b, b), d)


@pytest.fixture
def fp8_args(rng):
    qa, sfa = deep_gemm.per_token_cast_to_fp8(rng.standard_normal((8, 256), dtype=np.float32), use_ue8m0=False)
    qb, sfb = deep_gemm.per_block_cast_to_fp8(rng.standard_normal((16, 256), dtype=np.float32), use_ue8m0=False)
    return (qa, sfa), (qb, sfb), poisoned((8, 16), BF16)


def test_fp8_scale_factor_shape(fp8_args):
    (qa, sfa), b, d = fp8_args
    expect_invalid(lambda: deep_gemm.fp8_gemm_nt((qa, sfa[:, :1]), b, d), d,
                   r"fp8_fp4_gemm_nt: argument 'a.scale' must have shape \[8, 2\]")


def test_fp8_recipe_and_recipe_pairs_are_exclusive(fp8_args):
    a, b, d = fp8_args
    expect_invalid(lambda: deep_gemm.fp8_gemm_nt(a, b, d, recipe=(1, 128, 128), recipe_a=(1, 128)), d,
                   r"pass either 'recipe' or 'recipe_a'/'recipe_b', not both")
    expect_invalid(lambda: deep_gemm.fp8_gemm_nt(a, b, d, recipe=(1, 128)), d,
                   r"argument 'recipe' must have 3 entries, got 2")
    with pytest.raises(TypeError, match="argument 'recipe_b' must be a tuple of 2 ints"):
        deep_gemm.fp8_gemm_nt(a, b, d, recipe_b=(1.5, 128))


def test_fp8_operand_dtype(fp8_args):
    (qa, sfa), b, d = fp8_args
    expect_invalid(lambda: deep_gemm.fp8_gemm_nt((qa.astype(BF16), sfa), b, d), d,
                   r"fp8_fp4_gemm_nt: argument 'a' must have dtype float8_e4m3fn")


def test_fp8_non_power_of_two_sf_cannot_be_packed(rng):
    sf = np.full((4, 8), 0.3, np.float32)
    with pytest.raises(RuntimeError, match="must hold positive normal powers of two to pack as UE8M0, got 0.3"):
        deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)


def test_mn_major_packed_fp4_matches_k_major(rng):
    """FP4 B packed along N ('nn', [K, N/2] bytes) gives the bits of the same values packed along K."""
    m, n, k = 8, 16, 64
    qa, sfa = deep_gemm.per_token_cast_to_fp8(rng.standard_normal((m, k), dtype=np.float32), use_ue8m0=True)
    codes = rng.integers(0, 16, size=(n, k), dtype=np.uint8)
    along_k = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)  # [N, K/2]
    along_n = (codes[0::2, :] | (codes[1::2, :] << 4)).T.copy().astype(np.uint8).view(np.int8)  # [K, N/2]
    sfb = np.full((n, k // 32), 0.5, np.float32)
    d_k, d_n = poisoned((m, n), np.float32), poisoned((m, n), np.float32)
    deep_gemm.fp8_fp4_gemm_nt((qa, sfa), (along_k, sfb), d_k, recipe_a=(1, 128), recipe_b=(1, 32))
    deep_gemm.fp8_fp4_gemm_nn((qa, sfa), (along_n, sfb.T), d_n, recipe_a=(1, 128), recipe_b=(1, 32))
    np.testing.assert_array_equal(bits(d_k), bits(d_n))


# ---- einsum / fp8_einsum: scale extents, outputs that share memory with themselves, c aliasing d ----

def _fp8_heads(rng, b, h, r, d):
    from helpers import E4M3
    x = rng.standard_normal((b, h, r), dtype=np.float32).astype(E4M3)
    y = rng.standard_normal((h, d, r), dtype=np.float32).astype(E4M3)
    sx = np.ones((b, h, (r + 127) // 128), np.float32)
    sy = np.ones((h, (d + 127) // 128, (r + 127) // 128), np.float32)
    return x, sx, y, sy


def test_fp8_einsum_scale_batch_and_heads_checked(rng):
    x, sx, y, sy = _fp8_heads(rng, 8, 2, 256, 256)
    out = poisoned((8, 2, 256), BF16)
    expect_invalid(lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", (x, sx[:1].copy()), (y, sy), out), out,
                   r"fp8_einsum: argument 'a.scale' must have shape \[8, 2, ")
    expect_invalid(lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", (x, sx), (y, sy[:1].copy()), out), out,
                   r"fp8_einsum: argument 'b.scale' must have shape \[2, ")


def _self_overlapping(shape, element_strides, dtype):
    base = poisoned((int(np.prod(shape)) * 4 + 64,), dtype)
    return np.lib.stride_tricks.as_strided(base, shape, [s * base.itemsize for s in element_strides]), base


@pytest.mark.parametrize("expr", ["bhr,hdr->bhd", "bhd,hdr->bhr"])
def test_einsum_rejects_self_overlapping_d(rng, expr):
    a = rng.standard_normal((4, 2, 64), dtype=np.float32).astype(BF16)
    b = rng.standard_normal((2, 64, 64), dtype=np.float32).astype(BF16)
    d, base = _self_overlapping((4, 2, 64), (2, 2, 1), BF16)
    expect_invalid(lambda: deep_gemm.einsum(expr, a, b, d), base, r"einsum: .*'d'.*share memory")


def test_fp8_einsum_rejects_self_overlapping_d(rng):
    x, sx, y, sy = _fp8_heads(rng, 4, 2, 128, 128)
    d, base = _self_overlapping((4, 2, 128), (0, 128, 1), BF16)
    expect_invalid(lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", (x, sx), (y, sy), d), base,
                   r"fp8_einsum: .*'d'.*share memory")


def test_einsum_bmk_c_must_be_d_itself(rng):
    a = rng.standard_normal((3, 4, 32), dtype=np.float32).astype(BF16)
    b = rng.standard_normal((3, 6, 32), dtype=np.float32).astype(BF16)
    d = poisoned((4, 6), np.float32)
    c = d.reshape(-1)[:6].reshape(1, 6)
    expect_invalid(lambda: deep_gemm.einsum("bmk,bnk->mn", a, b, d, c), d, r"einsum: argument 'c' must be 'd' itself")
