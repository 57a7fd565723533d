"""T.copysign and T.log1p (TileKernels' engram gate and softplus scoring) against numpy, including
signed zeros, tiny arguments and infinities."""
import numpy as np

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T


@tessera.jit(out_idx=[-1])
def binary_math(name, n):
    @T.prim_func
    def main(a: T.Tensor((n,), "float32"), b: T.Tensor((n,), "float32"), out: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                out[i] = T.copysign(a[i], b[i]) if name == "copysign" else T.log1p(a[i]) + b[i] * 0.0
    return main


def test_copysign_takes_the_sign_of_negative_zero():
    a = np.array([1.5, -2.0, 0.0, -0.0, 3.0, -4.0, np.inf], np.float32)
    b = np.array([-1.0, 2.0, -0.0, 0.0, -0.0, np.inf, -3.0], np.float32)
    out = binary_math("copysign", 7)(a, b)
    np.testing.assert_array_equal(out, np.copysign(a, b))
    np.testing.assert_array_equal(np.signbit(out), np.signbit(np.copysign(a, b)))


def test_log1p_is_accurate_for_tiny_and_large_arguments():
    a = np.array([0.0, 1e-10, -1e-7, 3e-5, 0.5, -0.5, 7.0, 1e30, np.inf, -0.999], np.float32)
    out = binary_math("log1p", a.size)(a, np.zeros_like(a))
    np.testing.assert_allclose(out, np.log1p(a.astype(np.float64)), rtol=2e-7, atol=0)
