"""TVM's thread all-reduce (T.attr + T.comm_reducer + T.tvm_thread_allreduce) in per-thread kernels,
per-thread kernels in eager-style @jit functions, T.thread_binding, and .compile() of a tuned
eager-style kernel (TileLang's GEMV example uses all of them). Sums are checked bitwise against the
butterfly order the runtime documents; a non-power-of-two group sums from its first lane."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera import NotImplementedInTessera

RNG = np.random.default_rng(35)


def butterfly(lanes, combine):
    v = list(lanes)
    while len(v) > 1:
        half = len(v) // 2
        v = [combine(v[j], v[j + half]) for j in range(half)]
    return v[0]


def fold(lanes, combine):
    total = lanes[0]
    for x in lanes[1:]:
        total = combine(total, x)
    return total


@tessera.jit
def allreduce_rows(X, block_n: int, reduce_threads: int, use_max: bool = False):
    """out[n] = the sum (or max) of X[n, :reduce_threads], one thread per element, threads=(block_n,
    reduce_threads): each group of threads that share tn is strided by block_n in the linear order."""
    N = T.const("N")
    X: T.Tensor((N, reduce_threads), T.float32)
    out = T.empty((N, reduce_threads), T.float32)
    with T.Kernel(T.ceildiv(N, block_n), threads=(block_n, reduce_threads)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.thread_binding(0, reduce_threads, thread="threadIdx.y")
        value = T.alloc_local((1,), T.float32)
        reduced = T.alloc_local((1,), T.float32)
        value[0] = X[bn * block_n + tn, tk]
        combine = (lambda x, y: T.max(x, y)) if use_max else (lambda x, y: x + y)
        with T.attr(T.comm_reducer(combine, [T.cast(0, T.float32)]), "reduce_scope",
                    T.reinterpret(T.uint64(0), dtype="handle")):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value[0], True, reduced[0], tk, dtype="handle"))
        out[bn * block_n + tn, tk] = reduced[0]
    return out


@pytest.mark.parametrize("n,block_n,reduce_threads", [(10, 2, 32), (7, 4, 8), (5, 3, 6)])
def test_allreduce_over_a_strided_thread_dimension(n, block_n, reduce_threads):
    x = (RNG.standard_normal((n, reduce_threads)) * 10).astype(np.float32)
    out = np.asarray(allreduce_rows(x, block_n, reduce_threads))
    order = butterfly if reduce_threads & (reduce_threads - 1) == 0 else fold
    want = np.array([order([np.float32(v) for v in row], lambda a, b: np.float32(a + b)) for row in x], np.float32)
    np.testing.assert_array_equal(out, np.repeat(want[:, None], reduce_threads, 1))
    np.testing.assert_allclose(out[:, 0], x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    top = np.asarray(allreduce_rows(x, block_n, reduce_threads, use_max=True))
    np.testing.assert_array_equal(top, np.repeat(x.max(1, keepdims=True), reduce_threads, 1))


@tessera.jit(out_idx=[-1])
def allreduce_dim0(threads_x, threads_y):
    @T.prim_func
    def main(X: T.Tensor((threads_y, threads_x), "int32"), out: T.Tensor((threads_y, threads_x), "int32")):
        with T.Kernel(1, threads=(threads_x, threads_y)) as _:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            acc = T.alloc_local((1,), "int32")
            with T.attr(T.comm_reducer(lambda a, b: a + b, [0]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), X[ty, tx], True, acc[0], tx, dtype="handle"))
            out[ty, tx] = acc[0]
    return main


def test_allreduce_over_the_contiguous_thread_dimension_of_integers():
    x = RNG.integers(-1000, 1000, (3, 16), dtype=np.int32)
    out = np.asarray(allreduce_dim0(16, 3)(x))
    np.testing.assert_array_equal(out, np.repeat(x.sum(1, keepdims=True), 16, 1))


def test_allreduce_needs_its_reduce_scope_and_one_value():
    def kernel(count, scoped):
        @T.prim_func
        def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                tid = T.get_thread_binding()
                red = T.alloc_local((1,), "float32")
                call = lambda: T.tvm_thread_allreduce(T.uint32(count), X[tid], True, red[0], tid)  # noqa: E731
                if scoped:
                    with T.attr(T.comm_reducer(lambda a, b: a + b, [0.0]), "reduce_scope", 0):
                        T.evaluate(call())
                else:
                    T.evaluate(call())
                Y[tid] = red[0]
        return main

    with pytest.raises(NotImplementedInTessera, match="outside `with T.attr"):
        kernel(1, False)
    with pytest.raises(NotImplementedInTessera, match="count 1"):
        kernel(2, True)
    with pytest.raises(NotImplementedInTessera, match="only T.attr"):
        @T.prim_func
        def other(X: T.Tensor((4,), "float32")):
            with T.Kernel(1) as _:
                with T.attr(0, "pragma_unroll", 1):
                    X[0] = 1.0


def test_thread_binding_takes_only_a_whole_thread_dimension():
    with pytest.raises(NotImplementedInTessera, match="only the whole extent"):
        @T.prim_func
        def main(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _:
                tid = T.thread_binding(0, 16, thread="threadIdx.x")
                X[tid] = 1.0


@tessera.jit
def per_thread_scale(X, block: int):
    """An eager-style kernel whose thread index is a value: traced as a per-thread kernel."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block)) as bx:  # TileLang's default: 128 threads
        tid = T.get_thread_binding(0)
        if bx * block + tid < N and tid < block:
            Y[bx * block + tid] = X[bx * block + tid] * 3.0 + T.cast(tid, T.float32)
    return Y


def test_eager_kernel_with_a_per_thread_index():
    x = RNG.standard_normal(300).astype(np.float32)
    y = np.asarray(per_thread_scale(x, 128))
    np.testing.assert_array_equal(y, x * np.float32(3) + (np.arange(300) % 128).astype(np.float32))


def test_compile_of_a_tuned_eager_kernel_tunes_and_returns_the_best():
    seen = []

    @tessera.tl.autotune(configs=[{"block": 32}, {"block": 64}], warmup=1, rep=2, cache_results=False)
    @tessera.jit
    def twice(X, block=None):
        seen.append(block)
        N = T.const("N")
        X: T.Tensor((N,), T.float32)
        Y = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    Y[bx * block + i] = X[bx * block + i] * 2.0
        return Y

    kernel = twice.compile(N=200)
    assert kernel.config in ({"block": 32}, {"block": 64})
    assert {32, 64} <= set(seen)
    x = RNG.standard_normal(200).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(kernel(x)), x * np.float32(2))
    traced = len(seen)
    given = twice.compile(N=200, block=48)  # a tuned parameter given: that config's kernel, untuned
    assert seen[traced:] == [48]
    np.testing.assert_array_equal(np.asarray(given(x)), x * np.float32(2))
