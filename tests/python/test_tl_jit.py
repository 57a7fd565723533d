"""tessera.jit and its tooling: outputs, generated source, the kernel cache across processes, the
profiler, the autotuner, the AOT command (`tessera tlc`), other instruction sets, determinism."""
import json
import os
import platform
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import test_tl_common  # noqa: F401 - kernel cache + examples on sys.path

import tessera
import tessera.language as T
from tessera import InvalidArgumentError

import elementwise_add
import flash_attention
import gemm

EXAMPLES = test_tl_common.EXAMPLES


def scale_kernel(factor=2.0):
    N = T.dynamic("N")

    @T.prim_func
    def scale(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * factor

    return scale


def test_out_idx_source_and_stats():
    k = tessera.tl.compile(scale_kernel(), out_idx=-1)
    x = np.arange(300, dtype=np.float32)
    np.testing.assert_array_equal(k(x), x * 2)
    both = tessera.tl.compile(scale_kernel(), out_idx=None)
    y = np.zeros(300, np.float32)
    assert both(x, y) is None
    np.testing.assert_array_equal(y, x * 2)
    src = k.get_kernel_source()
    assert "tessera_tl_launch_v1" in src and "tlrt::ld_f32" in src and "rt->launch" in src
    stats = k.compile_stats
    assert {"lower_ms", "codegen_ms", "compile_ms", "load_ms"} <= set(stats)
    with pytest.raises(InvalidArgumentError, match="expected 1 inputs"):
        k(x, x)
    with pytest.raises(InvalidArgumentError, match="out_idx 5 is out of range"):
        tessera.tl.compile(scale_kernel(), out_idx=5)


def test_disk_cache_serves_a_new_process():
    code = f"""
import sys; sys.path.insert(0, {EXAMPLES!r})
import json, elementwise_add
k = elementwise_add.elementwise_add("relu")
print(json.dumps(k.compile_stats))
"""
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                                      env=os.environ).stdout) for _ in range(2)]
    assert runs[1]["disk_cache_hit"] == 1.0 and runs[1]["compile_ms"] == 0.0
    assert runs[1]["load_ms"] < 1000  # a cache hit only loads the library (timed in `tessera bench tl`)


def test_profiler_and_allclose(rng):
    kernel = gemm.matmul("nt", relu=True)
    a, b = gemm.make_inputs(64, 48, 32, "nt", rng)
    prof = kernel.get_profiler()
    ms = prof.do_bench(input_tensors=[a, b], rep=5, flush_cache=False)
    assert ms > 0
    ref = lambda x, y: gemm.reference(x, y, "nt")  # noqa: E731
    prof.assert_allclose(ref, input_tensors=[a, b], atol=0.05, rtol=0.01)
    with pytest.raises(AssertionError, match="mismatch"):
        prof.assert_allclose(lambda x, y: ref(x, y) + 1.0, input_tensors=[a, b], atol=0.05, rtol=0.01)
    assert tessera.tl.do_bench(lambda: None, rep=1, flush_cache=False) >= 0


def test_autotuner_checks_candidates_and_caches_the_winner():
    calls = []

    @tessera.tl.autotune(configs=[{"block": 64}, {"block": 0}, {"block": 256}], warmup=1, rep=2,
                         ref_prog=lambda x: x * 3)
    @tessera.jit(out_idx=[-1])
    def tripled(n, block=128):
        calls.append(block)
        if block == 0:
            raise ValueError("block must be positive")  # a config that fails: skipped with its reason

        @T.prim_func
        def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
                for i in T.Parallel(block):
                    Y[bx * block + i] = X[bx * block + i] * 3

        return main

    best = tripled(1000)
    assert best.config in ({"block": 64}, {"block": 256})
    assert best.latency > 0 and best.ref_latency > 0
    assert any("block must be positive" in f for f in best.autotune_failures)
    assert tripled(1000) is best  # memoized per shape
    x = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(best(x), x * 3)
    tuned_dir = os.path.join(tessera.tl.cache_dir(), "autotune")
    assert any(f.endswith(".json") for f in os.listdir(tuned_dir))


def test_aot_library_from_tlc(tmp_path, rng):
    exe = shutil.which("tessera", path=os.path.dirname(sys.executable)) or shutil.which("tessera")
    lib = str(tmp_path / "libadd.so")
    if exe:
        cmd = [exe, "tlc", os.path.join(EXAMPLES, "elementwise_add.py"), "-o", lib, "--arg", "activation=relu"]
    else:  # the CLI is not installed: the same compiler through Python
        cmd = [sys.executable, "-m", "tessera.tl.aot", os.path.join(EXAMPLES, "elementwise_add.py"), "-o", lib,
               "--arg", "activation=relu"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ).stdout
    assert "wrote" in out
    # Loaded by the C++ loader alone (signature from the library), no Python frontend involved.
    kernel = tessera.tl.load_library(lib)
    assert kernel.param_names == ["A", "B", "C"] and kernel.symbol_names == ["M", "N"]
    a = rng.standard_normal((33, 70)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((33, 70)).astype(ml_dtypes.bfloat16)
    c = np.zeros_like(a)
    from tessera._arrays import to_ref
    kernel([to_ref(a, "k", "A"), to_ref(b, "k", "B"), to_ref(c, "k", "C", writable=True)])
    want = elementwise_add.reference(a, b, "relu")
    assert np.abs(c.astype(np.float64) - want).max() <= np.abs(want).max() * 2 ** -8


# A lower SIMD level of this machine's family (ARM builds refuse x86 names), and the scalar loops.
LOWER_SIMD_LEVEL = "neon" if platform.machine() in ("aarch64", "arm64") else "avx2"


@pytest.mark.parametrize("isa", [LOWER_SIMD_LEVEL, "scalar"])
def test_other_instruction_sets(rng, isa):
    """TESSERA_ISA / set_isa cap the target: 8-lane AVX2 (or two-register NEON) vectors, or scalar loops."""
    tessera.set_isa(isa)
    try:
        kernel = tessera.tl.compile(scale_kernel(3.0), out_idx=-1)
        x = rng.standard_normal(1001).astype(np.float32)
        np.testing.assert_array_equal(kernel(x), x * np.float32(3.0))
        src = kernel.get_kernel_source()
        assert f"cpu-{isa}" in src
        g = gemm.matmul("nt")
        a, b = gemm.make_inputs(70, 50, 40, "nt", rng)
        want = gemm.reference(a, b, "nt")
        assert np.abs(g(a, b).astype(np.float64) - want).max() <= np.abs(want).max() * 2 ** -7
    finally:
        tessera.set_isa(None)


def test_bitwise_identical_across_thread_counts(rng):
    kernel = flash_attention.flashattn(1, 2, 200, 64, True, 1)
    q, k, v = flash_attention.make_inputs(1, 2, 200, 64, 1, rng)
    outs = []
    for threads in (1, 2, 3):
        tessera.set_num_threads(threads)
        outs.append(kernel(q, k, v).view(np.uint16).copy())
    tessera.set_num_threads(0)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_torch_tensors_when_available(rng):
    torch = pytest.importorskip("torch")
    k = tessera.tl.compile(scale_kernel(), out_idx=-1)
    x = torch.arange(100, dtype=torch.float32)
    y = k(x)
    assert isinstance(y, torch.Tensor)
    assert torch.equal(y, x * 2)
