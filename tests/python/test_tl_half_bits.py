"""``T.call_extern(T.float16, "__float2half_rz", x)`` (float32 to float16 rounded toward zero) and
``T.reinterpret(float16 -> uint16)``, checked bit for bit against a numpy reference on random values
over float16's whole range (subnormals, overflow, infinities, signed zeros)."""
import numpy as np

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T


@tessera.jit
def half_toward_zero():
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), h: T.Tensor((n,), "float16"), bits: T.Tensor((n,), "int32")):
        with T.Kernel(T.ceildiv(n, 64), threads=1) as bx:
            for i in T.serial(64):
                j = bx * 64 + i
                if j < n:
                    v = T.alloc_var(T.float16)
                    v = T.call_extern(T.float16, "__float2half_rz", x[j])
                    h[j] = v
                    bits[j] = T.cast(T.reinterpret(v, T.uint16), T.int32)
    return main


def _toward_zero(x):
    out = np.empty(len(x), np.float16)
    for i, v in enumerate(x.astype(np.float64)):
        if np.isinf(v) or abs(v) >= 65520:  # past the largest finite float16: it, or infinity
            out[i] = np.float16(np.copysign(np.inf if np.isinf(v) else 65504, v))
            continue
        r = np.float16(v)
        if abs(float(r)) > abs(v):
            r = np.nextafter(r, np.float16(0))
        out[i] = np.copysign(r, np.float16(v)) if r == 0 else r
    return out


def test_float2half_rz_and_half_bits():
    rng = np.random.default_rng(17)
    scale = np.float32(10.0) ** rng.integers(-9, 6, 301).astype(np.float32)
    x = np.concatenate([rng.standard_normal(301).astype(np.float32) * scale,
                        np.float32([0, -0.0, 1, -1, 65504, 65519.9, 70000, -1e9, np.inf, -np.inf,
                                    6e-8, 5.96e-8, 3e-8, 1e-5, -2.5e-6])]).astype(np.float32)
    h, bits = np.zeros(len(x), np.float16), np.zeros(len(x), np.int32)
    half_toward_zero().call_all([x, h, bits])
    want = _toward_zero(x)
    np.testing.assert_array_equal(h.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(bits.astype(np.uint16), want.view(np.uint16))
