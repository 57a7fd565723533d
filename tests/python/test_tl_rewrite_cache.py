"""A kernel definition is rewritten (parsed, transformed, compiled) once, however often a factory defines it
or a per-thread kernel is traced again; each definition still sees its own closure values and globals."""
import numpy as np

import test_tl_common  # noqa: F401 - kernel cache

import tessera
import tessera.language as T
from tessera.language import _rewrite

OFFSET = 0.25  # a global the kernel reads: bound at each definition


def scale_and_shift(factor, n):
    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), out: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                if factor > 2:  # a Python-level if on a closure value
                    out[i] = x[i] * factor + OFFSET
                else:
                    out[i] = x[i] * factor - OFFSET
    return main


def test_each_definition_binds_its_own_closure_and_the_rewrite_is_compiled_once(monkeypatch):
    calls = []
    compile_rewritten = _rewrite._compile_rewritten
    monkeypatch.setattr(_rewrite, "_compile_rewritten", lambda fn: calls.append(fn) or compile_rewritten(fn))
    main_code = next(c for c in scale_and_shift.__code__.co_consts if getattr(c, "co_name", None) == "main")
    _rewrite._COMPILED.pop(main_code, None)
    x = np.random.default_rng(3).standard_normal(37).astype(np.float32)
    for factor, n, sign in [(1.5, 37, -1), (3.0, 37, 1), (2.0, 19, -1)]:
        kernel = tessera.jit(out_idx=[-1])(scale_and_shift)(factor, n)
        out = kernel(x[:n])
        np.testing.assert_array_equal(out, x[:n] * np.float32(factor) + np.float32(sign * OFFSET))
    assert [fn.__code__ for fn in calls] == [main_code]
