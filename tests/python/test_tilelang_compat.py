"""The opt-in ``tilelang`` alias (tessera.tilelang_compat): TileLang programs in both styles (a factory
returning a @T.prim_func, and the eager style with T.const / T.empty / annotations in the body),
the subscript and dtype spellings, helper modules, the autotune key rule, thread-role branches, views,
T.im2col and T.reinterpret, each checked against a numpy float64 reference."""
import os
import subprocess
import sys

import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.tilelang_compat as compat
from tessera import NotImplementedInTessera
from tessera.tl import profiler as tl_profiler

tilelang = compat.install()
import tilelang.language as T  # noqa: E402

# Importing the alias makes profilers hand torch tensors to reference programs (TileLang's behaviour);
# this module is imported while pytest collects, before other modules' tests run, so undo it here.
tl_profiler.set_input_kind("numpy")


def f64(x):
    from tessera._arrays import to_numpy

    return np.asarray(to_numpy(x) if not isinstance(x, np.ndarray) else x).astype(np.float64)


@tilelang.jit
def scaled_add(A, B, alpha: float, block_M: int, block_N: int, dtype: T.dtype = T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    B: T.Tensor[(M, N), dtype]
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
        for i, j in T.Parallel(block_M, block_N):
            C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] * alpha + \
                B[by * block_M + i, bx * block_N + j]
    return C


def test_eager_call_binds_sizes_from_arguments(rng):
    a = rng.standard_normal((70, 45)).astype(np.float32)
    b = rng.standard_normal((70, 45)).astype(np.float32)
    c = scaled_add(a, b, 0.5, 32, 16)
    np.testing.assert_allclose(f64(c), f64(a) * 0.5 + f64(b), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="T.const 'M'"):
        scaled_add(a, b[:60], 0.5, 32, 16)


def test_eager_compile_with_explicit_sizes(rng):
    kernel = scaled_add.compile(M=64, N=32, alpha=2.0, block_M=32, block_N=32)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_allclose(f64(kernel(a, b)), 2.0 * f64(a) + f64(b), rtol=1e-6, atol=1e-6)
    assert kernel is scaled_add.compile(M=64, N=32, alpha=2.0, block_M=32, block_N=32)  # memoized


@tilelang.jit
def row_sums_dynamic(X, blk):
    rows = T.dynamic("rows")
    X: T.Tensor((rows, 64), T.float32)
    Y = T.empty((rows,), T.float32)
    with T.Kernel(T.ceildiv(rows, blk)) as (pid,):  # a 1-tuple target
        tile = T.alloc_fragment((blk, 64), T.float32)
        sums = T.alloc_fragment((blk,), T.float32)
        T.copy(X[pid * blk, 0], tile)
        T.reduce_sum(tile, sums, dim=1)
        T.copy(sums, Y[pid * blk])
    return Y


def test_eager_dynamic_dims_and_one_tuple_block_index(rng):
    for rows in (37, 80):
        x = rng.standard_normal((rows, 64)).astype(np.float32)
        np.testing.assert_allclose(f64(row_sums_dynamic(x, 16)), f64(x).sum(1), rtol=1e-5, atol=1e-5)


@tilelang.jit(out_idx=[-1])
def split_then_combine(M, parts, block):
    @T.prim_func
    def main(X: T.Tensor((M, parts * block), "float32"), Y: T.Tensor((M,), "float32")):
        partial = T.alloc_global((M, parts), "float32")
        with T.Kernel(M, parts) as (row, part):
            tile = T.alloc_fragment((1, block), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[row, part * block], tile)
            T.reduce_sum(tile, s, dim=1)
            partial[row, part] = s[0]
        with T.Kernel(M) as row:
            acc = T.alloc_var("float32", init=0.0)
            for p in T.serial(parts):
                acc += partial[row, p]
            Y[row] = acc

    return main


def test_lazy_factory_with_global_scratch(rng):
    kernel = split_then_combine(12, 3, 32)
    assert [p.name for p in kernel.params] == ["X", "Y"]  # the scratch tensor is not a parameter
    x = rng.standard_normal((12, 96)).astype(np.float32)
    np.testing.assert_allclose(f64(kernel(x)), f64(x).sum(1), rtol=1e-5, atol=1e-5)
    assert split_then_combine.compile(12, 3, 32) is kernel


def test_dynamic_symbol_arithmetic_outside_the_prim_func(rng):
    @tilelang.jit(out_idx=[-1])
    def shifted(block):
        n = T.dynamic("n")
        blocks = T.ceildiv(n, block)  # built before any kernel exists
        offset = T.max(n // 2, 1)

        @T.prim_func
        def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(blocks) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] + offset

        return main

    x = rng.standard_normal(37).astype(np.float32)
    np.testing.assert_allclose(f64(shifted(8)(x)), f64(x) + 18, rtol=1e-6)


def test_autotune_skips_tuning_when_a_tuned_key_is_given(rng):
    calls = []

    @tilelang.autotune(configs=[{"block": 16}, {"block": 32}], warmup=1, rep=1)
    @tilelang.jit(out_idx=[-1])
    def double(N, block=None):
        calls.append(block)

        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, block)) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * 2.0

        return main

    kernel = double(100, block=32)
    assert calls == [32]
    x = rng.standard_normal(100).astype(np.float32)
    np.testing.assert_allclose(f64(kernel(x)), 2 * f64(x))


@tilelang.jit
def roles(X, threads):
    X: T.Tensor((8, 4), T.float32)
    low = T.empty((8,), T.float32)
    high = T.empty((8,), T.float32)
    with T.Kernel(8, threads=threads) as row:
        if T.get_thread_binding() < 32:
            low[row] = X[row, 0] + X[row, 1]
        else:
            high[row] = X[row, 2] * X[row, 3]
    return low, high


def test_thread_role_branches_run_the_sides_the_threads_take(rng):
    x = rng.standard_normal((8, 4)).astype(np.float32)
    low, high = roles(x, 96)
    np.testing.assert_allclose(f64(low), f64(x[:, 0]) + f64(x[:, 1]), rtol=1e-6)
    np.testing.assert_allclose(f64(high), f64(x[:, 2]) * f64(x[:, 3]), rtol=1e-6)


def test_per_thread_values_run_and_gpu_only_ops_name_the_construct():
    @tilelang.jit
    def per_thread(X):
        X: T.Tensor((128,), T.float32)
        with T.Kernel(1, threads=128):
            tid = T.get_thread_binding(0)
            X[tid] = T.cast(tid, T.float32) * 2.0

    x = np.zeros(128, np.float32)
    per_thread(x)  # an eager-style kernel is traced again as a per-thread kernel, like a @T.prim_func
    np.testing.assert_array_equal(x, np.arange(128, dtype=np.float32) * 2)

    @tilelang.jit
    def shuffle(X):
        X: T.Tensor((32,), T.float32)
        with T.Kernel(1):
            X[0] = T.shfl_xor(X[0], 1)

    with pytest.raises(NotImplementedInTessera, match="T.shfl_xor"):
        shuffle(np.zeros(32, np.float32))


def test_unsupported_dtypes_compare_by_name_and_raise_when_a_kernel_uses_them():
    # Cast configs compare dtypes before building a kernel (`cfg.dtype == T.float8_e8m0fnu`)
    assert T.float8_e8m0fnu == T.float8_e8m0fnu and T.float8_e8m0fnu != T.float8_e4m3fn
    assert T.float8_e4m3fn != T.float8_e8m0fnu and len({T.float8_e8m0fnu, T.float8_e8m0fnu}) == 1

    @tilelang.jit
    def scale_table(n):
        @T.prim_func
        def main(X: T.Tensor((n,), T.float8_e8m0fnu)):
            with T.Kernel(1):
                X[0] = 0

        return main

    with pytest.raises(NotImplementedInTessera, match="T.float8_e8m0fnu is not supported"):
        scale_table(7)


def test_float4_and_pointer_tables_are_dtypes_of_the_alias():
    """TileKernels' FP4 casts and multilayer recompute use them (tests: test_tl_float4.py,
    test_tl_make_tensor.py)."""
    assert T.float4_e2m1fn == T.dtype("float4_e2m1fn") and T.float4_e2m1fn != T.float8_e4m3fn
    assert T.ptr == T.int64


@tilelang.jit(out_idx=[-1])
def column_absmax_by_pairs(rows, k):
    @T.prim_func
    def main(X: T.Tensor((rows, 2 * k), T.float32), out: T.Tensor((2 * k,), T.bfloat16)):
        with T.Kernel(1):
            acc = T.alloc_local((k,), T.bfloat16x2)
            lanes = T.view(acc, (2 * k,), T.bfloat16)
            for j in T.serial(k):
                acc[j] = T.abs2(T.bfloat16x2(X[0, 2 * j], X[0, 2 * j + 1]))
            for r in T.serial(1, rows):
                for j in T.serial(k):
                    acc[j] = T.max2(T.abs2(T.bfloat16x2(X[r, 2 * j], X[r, 2 * j + 1])), acc[j])
            for i in T.serial(2 * k):
                out[i] = lanes[i]

    return main


def test_bfloat16x2_pairs_round_per_lane_and_view_as_lanes(rng):
    import ml_dtypes

    x = rng.standard_normal((7, 2 * 13)).astype(np.float32) * 3
    out = column_absmax_by_pairs(7, 13)(x)
    expected = np.abs(x.astype(ml_dtypes.bfloat16)).max(axis=0)
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))
    assert T.bfloat16x2 == T.bfloat16x2 and T.bfloat16x2 != T.float16x2


def test_bfloat16x2_misuse_names_the_rule():
    @tilelang.jit
    def scalar_into_pairs(n):
        @T.prim_func
        def main(X: T.Tensor((n,), T.bfloat16)):
            with T.Kernel(1):
                acc = T.alloc_local((n,), T.bfloat16x2)
                acc[0] = X[0]

        return main

    with pytest.raises(tessera.InvalidArgumentError, match="expected a pair"):
        scalar_into_pairs(3)

    @tilelang.jit
    def pairs_as_float32(n):
        @T.prim_func
        def main(X: T.Tensor((n,), T.float32)):
            with T.Kernel(1):
                acc = T.alloc_local((n,), T.bfloat16x2)
                X[0] = T.view(acc, (n,), T.float32)[0]

        return main

    with pytest.raises(NotImplementedInTessera, match="only as bfloat16"):
        pairs_as_float32(3)


@tilelang.jit
def conv_nhwc(data, kernel, S, D, P, block_M, block_N, block_K):
    N, C, H, W, F, K = T.const("N, C, H, W, F, K")
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    data: T.Tensor((N, H, W, C), T.float32)
    kernel: T.Tensor((K, K, C, F), T.float32)
    out = T.empty((N, OH, OW, F), T.float32)
    with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M)) as (bx, by):
        data_s = T.alloc_shared((block_M, block_K), T.float32)
        kernel_s = T.alloc_shared((block_K, block_N), T.float32)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        kernel_flat = T.Tensor((K * K * C, F), T.float32, kernel.data)
        out_flat = T.Tensor((N * OH * OW, F), T.float32, out.data)
        T.clear(acc)
        for k in T.serial(T.ceildiv(K * K * C, block_K)):
            T.im2col(data, data_s, by, k, K, S, D, P)
            T.copy(kernel_flat[k * block_K, bx * block_N], kernel_s)
            T.gemm(data_s, kernel_s, acc)
        T.copy(acc, out_flat[by * block_M, bx * block_N])
    return out


def conv_reference(x, w, stride, dilation, pad):
    n, h, wd, c = x.shape
    k, f = w.shape[0], w.shape[3]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh = (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, oh, ow, f))
    for kh in range(k):
        for kw in range(k):
            patch = xp[:, kh * dilation: kh * dilation + stride * (oh - 1) + 1: stride,
                       kw * dilation: kw * dilation + stride * (ow - 1) + 1: stride, :]
            out += patch @ w[kh, kw]
    return out


def test_im2col_and_reshaped_views(rng):
    x = rng.standard_normal((2, 9, 7, 6)).astype(np.float32)
    w = rng.standard_normal((3, 3, 6, 20)).astype(np.float32)
    got = conv_nhwc(x, w, 2, 1, 1, 32, 16, 16)
    np.testing.assert_allclose(f64(got), conv_reference(f64(x), f64(w), 2, 1, 1), rtol=1e-4, atol=1e-4)


def test_reinterpret_16_bit_patterns_as_float16_and_bfloat16():
    import ml_dtypes

    @tilelang.jit
    def decode(B, dtype):
        B: T.Tensor((65536,), T.int32)
        C = T.empty((65536,), dtype)
        with T.Kernel(64) as bx:
            for i in T.Parallel(1024):
                C[bx * 1024 + i] = T.reinterpret(T.cast(B[bx * 1024 + i], T.uint16), dtype)
        return C

    codes = np.arange(65536, dtype=np.int32)
    for dtype, np_type in (("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16)):
        want = codes.astype(np.uint16).view(np_type)
        got = np.asarray(decode(codes, dtype))
        finite = np.isfinite(want.astype(np.float32))
        np.testing.assert_array_equal(got.view(np.uint16)[finite], codes.astype(np.uint16)[finite])
        assert np.isnan(got.astype(np.float32)[np.isnan(want.astype(np.float32))]).all()


def test_reducers_select_and_strided_parameters(rng):
    @tilelang.jit(out_idx=[-1])
    def masked_row_max(M, N):
        stride = T.dynamic("stride")

        @T.prim_func
        def main(X: T.StridedTensor[(M, N), (stride, 1), T.float32], Y: T.Tensor((M,), T.float32)):
            with T.Kernel(M) as row:
                T.assume(row < M)
                best = T.alloc_reducer((1,), T.float32, op="max")
                T.reducer_init(best)
                for j in T.Parallel(N):
                    T.reducer_update(best[0], T.Select(T.isfinite(X[row, j]), X[row, j], -1e30))
                T.finalize_reducer(best)
                Y[row] = best[0]

        return main

    x = rng.standard_normal((6, 64)).astype(np.float32)[:, :40]  # rows 64 apart: the strides come from the array
    x[2, 5] = np.inf
    got = masked_row_max(6, 40)(x)
    want = np.where(np.isfinite(x), x, -1e30).max(1)
    np.testing.assert_array_equal(f64(got), want.astype(np.float64))


def test_persistent_tiles_are_each_visited_once(rng):
    @tilelang.jit(out_idx=[-1])
    def tile_sums(rows, waves):
        @T.prim_func
        def main(X: T.Tensor((rows, 3, 32), "float32"), Y: T.Tensor((rows, 3), "float32")):
            with T.Kernel(waves) as pid:
                for r, c in T.Persistent([rows, 3], waves, pid):
                    tile = T.alloc_fragment((1, 32), "float32")
                    s = T.alloc_fragment((1,), "float32")
                    T.copy(X[r, c, 0], tile)
                    T.reduce_sum(tile, s, dim=1)
                    Y[r, c] = s[0]

        return main

    x = rng.standard_normal((7, 3, 32)).astype(np.float32)
    np.testing.assert_allclose(f64(tile_sums(7, 4)(x)), f64(x).sum(2), rtol=1e-5, atol=1e-5)


def test_helper_modules():
    torch = pytest.importorskip("torch")
    from tilelang.language.fp8 import determine_fp8_type
    from tilelang.profiler import do_bench
    from tilelang.utils.target import determine_target
    from tilelang.utils.tensor import torch_assert_close

    tilelang.testing.set_random_seed(7)
    a = torch.randn(1000)
    b = a.clone()
    b[0] += 1.0
    assert torch_assert_close(a, b, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match="mismatched"):
        torch_assert_close(a, b, max_mismatched_ratio=0.0)
    assert T.dtype(determine_fp8_type()).as_torch() == torch.float8_e4m3fn
    assert T.dtype(determine_fp8_type("e5m2")).as_torch() == torch.float8_e5m2
    assert determine_target() == "cpu"
    assert isinstance(tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED, str)
    assert do_bench(lambda: None, _n_warmup=1, _n_repeat=2, backend="cupti") >= 0


def test_alias_path_command():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "tessera.tilelang_compat", "--path"], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert os.path.isfile(os.path.join(out, "tilelang", "__init__.py"))
