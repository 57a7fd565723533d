"""T.Parallel loops that update an element several iterations share (acc[j // 4] += x[i, j]): the
vectorizer must not run such iterations as lanes of one vector (they would all add to the same old
value). Checked against numpy float64 sums."""
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T

RNG = np.random.default_rng(5)


@tessera.jit(out_idx=[-1])
def grouped_column_sums(rows, cols, group):
    groups = -(-cols // group)

    @T.prim_func
    def main(x: T.Tensor((rows, cols), "float32"), sums: T.Tensor((groups,), "float32")):
        with T.Kernel(1) as _:
            acc = T.alloc_reducer(groups, "float32", replication="all")
            T.clear(acc)
            for i, j in T.Parallel(rows, cols):
                acc[T.min(groups - 1, j // group)] += x[i, j]
            T.finalize_reducer(acc)
            T.copy(acc, sums)
    return main


@pytest.mark.parametrize("rows,cols,group", [(1, 12, 4), (8, 12, 4), (5, 37, 8), (3, 64, 16)])
def test_updates_of_shared_elements_in_parallel_loops(rows, cols, group):
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    want = np.array([x[:, g:g + group].astype(np.float64).sum() for g in range(0, cols, group)])
    np.testing.assert_allclose(grouped_column_sums(rows, cols, group)(x), want, rtol=1e-5, atol=1e-5)


@tessera.jit(out_idx=[-1])
def scaled_rows(rows, cols):
    @T.prim_func
    def main(x: T.Tensor((rows, cols), "float32"), y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1) as _:
            frag = T.alloc_fragment((rows, cols), "float32")
            T.copy(x, frag)
            for i, j in T.Parallel(rows, cols):
                frag[i, j] += frag[i, j] * 0.5  # one element per iteration: still a vector loop
            T.copy(frag, y)
    return main


def test_elementwise_updates_stay_correct():
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    np.testing.assert_allclose(scaled_rows(6, 40)(x), x.astype(np.float64) * 1.5, rtol=1e-6)
