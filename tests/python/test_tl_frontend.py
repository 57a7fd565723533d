"""The Python frontend (tessera.language): control flow on symbolic values, let semantics, T.alloc_var,
macros, closures, trace-time Python loops, loop kinds, scalar parameters, and compile-time errors that
point at the kernel's source line."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera import InvalidArgumentError, NotImplementedInTessera

THIS_FILE = __file__


def line_of(marker):
    """The line of this file that contains `marker` (a unique comment)."""
    with open(THIS_FILE) as f:
        for n, text in enumerate(f, 1):
            if marker in text and "line_of(" not in text:
                return n
    raise LookupError(marker)


def expect_error(build, cls, marker, *needles):
    with pytest.raises(cls) as info:
        build()
    msg = str(info.value)
    assert f"{THIS_FILE}:{line_of(marker)}" in msg, msg
    for n in needles:
        assert n in msg, msg


def test_control_flow_on_symbolic_values(rng):
    N = T.dynamic("N")

    @tessera.jit(out_idx=[-1])
    @T.prim_func
    def branches(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 64), threads=128) as bx:
            for i in T.Parallel(64):
                idx = bx * 64 + i
                v = X[idx]
                if v > 1.0 and not (v > 2.0):
                    Y[idx] = 1.0
                elif 0.0 <= v < 0.5 or v < -3.0:
                    Y[idx] = v * 2.0 if idx % 2 == 0 else v * 3.0
                else:
                    Y[idx] = -v

    x = (rng.standard_normal(1000) * 3).astype(np.float32)
    y = branches(x)
    idx = np.arange(1000)
    want = np.where((x > 1) & ~(x > 2), 1.0,
                    np.where(((0 <= x) & (x < 0.5)) | (x < -3), np.where(idx % 2 == 0, x * 2, x * 3), -x))
    np.testing.assert_array_equal(y, want.astype(np.float32))


def test_names_bind_values_once_and_alloc_var_accumulates():
    @tessera.jit(out_idx=[1, 2])
    @T.prim_func
    def lets(X: T.Tensor((8,), "float32"), Old: T.Tensor((8,), "float32"), Total: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as _:
            buf = T.alloc_fragment((8,), "float32")
            T.copy(X, buf)
            for i in T.Parallel(8):
                before = buf[i]  # evaluated here, not where `before` is used
                buf[i] = 100.0
                Old[i] = before
            s = T.alloc_var("float32")
            s = 0.0
            for k in T.serial(8):
                s += X[k]
            Total[0] = s

    x = np.arange(8, dtype=np.float32)
    old, total = lets(x)
    np.testing.assert_array_equal(old, x)
    assert total[0] == x.sum()


def test_macros_closures_and_python_loops():
    scale = 3.0

    @T.macro
    def axpy(dst, src, i, factor):
        dst[i] = dst[i] + src[i] * factor * scale

    @tessera.jit(out_idx=[-1])
    def kernel(reps):
        @T.prim_func
        def main(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=128) as _:
                acc = T.alloc_fragment((16,), "float32")
                T.clear(acc)
                for r in range(reps):  # a Python loop: unrolled at trace time
                    for i in T.Parallel(16):
                        axpy(acc, X, i, r + 1)
                T.copy(acc, Y)
        return main

    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(kernel(3)(x), x * 3.0 * (1 + 2 + 3))
    assert kernel(3) is kernel(3)  # memoized per argument tuple


def test_loop_kinds_and_scalar_parameters():
    @tessera.jit(out_idx=[1])
    @T.prim_func
    def loops(X: T.Tensor((4, 10), "int32"), Y: T.Tensor((4, 10), "int32"), bias: T.int32, gain: T.float32):
        with T.Kernel(1, threads=128) as _:
            for i, j in T.grid(4, 10):
                Y[i, j] = 0
            for i in T.unroll(4):
                for j in T.serial(1, 10, 2):  # 1, 3, 5, 7, 9
                    Y[i, j] = X[i, j] + bias
            for i in T.serial(4):
                Y[i, 0] = T.Cast("int32", T.Cast("float32", X[i, 0]) * gain)

    x = np.arange(40, dtype=np.int32).reshape(4, 10)
    y = loops(x, 7, 0.5)
    want = np.zeros_like(x)
    want[:, 1::2] = x[:, 1::2] + 7
    want[:, 0] = (x[:, 0] * 0.5).astype(np.int32)
    np.testing.assert_array_equal(y, want)


def test_dynamic_shapes_do_not_recompile(rng):
    M, N = T.dynamic("M"), T.dynamic("N")

    @tessera.jit(out_idx=[-1])
    @T.prim_func
    def double(X: T.Tensor((M, N), "bfloat16"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, 32), T.ceildiv(M, 4), threads=128) as (bx, by):
            for i, j in T.Parallel(4, 32):
                Y[by * 4 + i, bx * 32 + j] = X[by * 4 + i, bx * 32 + j] * 2

    path = double.library_path
    for shape in [(1, 1), (5, 33), (64, 64), (3, 1000)]:
        x = rng.standard_normal(shape).astype(T_bf16())
        np.testing.assert_array_equal(double(x).astype(np.float32), x.astype(np.float32) * 2)
    assert double.library_path == path


def T_bf16():  # noqa: N802
    import ml_dtypes
    return ml_dtypes.bfloat16


# ---- compile-time errors point at the author's line ----

def test_error_shape_mismatch():
    def build():
        @T.prim_func
        def bad(A: T.Tensor((128, 128), "float32")):
            with T.Kernel(1, threads=128) as _:
                s = T.alloc_shared((64, 64), "float32")
                T.copy(A[0:64, 0:32], s)  # marker: shape mismatch
        tessera.tl.compile(bad)

    expect_error(build, InvalidArgumentError, "marker: shape mismatch", "T.copy", "shape mismatch", "[64, 32]", "[64, 64]")


def test_error_wrong_scope_for_gemm():
    def build():
        @T.prim_func
        def bad(A: T.Tensor((64, 64), "bfloat16")):
            with T.Kernel(1, threads=128) as _:
                a = T.alloc_shared((64, 64), "bfloat16")
                c = T.alloc_shared((64, 64), "float32")
                T.copy(A, a)
                T.gemm(a, a, c)  # marker: wrong scope
        tessera.tl.compile(bad)

    expect_error(build, InvalidArgumentError, "marker: wrong scope", "T.gemm", "must be a fragment buffer")


def test_error_out_of_range_constant_tile():
    def build():
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as _:
                acc = T.alloc_fragment((64,), "float32")
                T.fill(acc[32:96], 0)  # marker: out of range
                T.copy(acc, A)
        tessera.tl.compile(bad)

    expect_error(build, InvalidArgumentError, "marker: out of range", "out-of-range constant tile", "[32, 96)")


def test_error_unsupported_constructs():
    def early_return():
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.serial(64):
                    if A[i] > 0:  # marker: return in symbolic if
                        return

    expect_error(early_return, NotImplementedInTessera, "marker: return in symbolic if", "'return'", "symbolic condition")

    def symbolic_range():
        @T.prim_func
        def bad(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=128) as _:
                for i in range(A[0]):  # marker: symbolic range
                    A[i] = 0

    expect_error(symbolic_range, InvalidArgumentError, "marker: symbolic range", "symbolic value", "T.serial")

    def barrier_in_per_thread_if():
        @T.prim_func
        def bad(A: T.Tensor((128,), "int32")):
            with T.Kernel(1, threads=128) as _:
                tid = T.get_thread_binding()
                if tid < 64:
                    T.sync_threads()  # marker: per-thread barrier
                A[tid] = 0

    expect_error(barrier_in_per_thread_if, NotImplementedInTessera, "marker: per-thread barrier", "T.sync_threads()",
                 "inside a loop or an if")


def test_error_symbolic_shape_for_on_chip_buffer():
    N = T.dynamic("N")

    def build():
        @T.prim_func
        def bad(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128) as _:
                T.alloc_fragment((N,), "float32")  # marker: symbolic alloc

    expect_error(build, InvalidArgumentError, "marker: symbolic alloc", "constant shapes")


def test_error_value_used_outside_its_loop():
    def build():
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as _:
                for i in T.serial(64):
                    v = A[i] * 2
                A[0] = v  # marker: escaped
        tessera.tl.compile(bad)

    expect_error(build, InvalidArgumentError, "marker: escaped", "variable 'v'", "outside the loop")


def test_error_python_variable_carried_across_loop_iterations():
    def build():
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32"), S: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=128) as _:
                s = 0.0
                for i in T.serial(64):
                    s = s + A[i]  # marker: carried
                S[0] = s

    expect_error(build, InvalidArgumentError, "marker: carried", "'s' is updated inside a T loop", "T.alloc_var")
