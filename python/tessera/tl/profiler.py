"""Timing and checking of kernels: ``do_bench`` (TileLang/Triton style: time budgets in ms, cache
flushing between runs, median by default) and ``Profiler`` (random inputs of the kernel's shapes,
``assert_allclose`` against a reference program)."""
import enum
import time

import numpy as np

from .._arrays import like, to_numpy, torch_module
from .._errors import InvalidArgumentError
from ._dtypes import PACKED, numpy_dtype, storage_shape

_input_kind = "numpy"


def set_input_kind(kind):
    """What Profiler.make_inputs returns: "numpy" arrays (the default) or "torch" CPU tensors (what
    TileLang's profiler passes to reference programs; the tilelang alias selects it)."""
    global _input_kind
    if kind not in ("numpy", "torch"):
        raise InvalidArgumentError(f"set_input_kind: argument 'kind' must be 'numpy' or 'torch', got {kind!r}")
    _input_kind = kind


def _as_input(array):
    if _input_kind != "torch":
        return array
    torch = torch_module()
    if torch is None:
        try:
            import torch
        except ImportError:
            return array
    return like(array, torch.empty(0))


def _float64(x):
    return np.asarray(to_numpy(x) if torch_module() is not None and not isinstance(x, np.ndarray) else x).astype(np.float64)

_FLUSH_BYTES = 128 << 20  # larger than the L3 of the CPUs we run on; read before each timed run
_flush_buffer = None


def _flush():
    """Evicts the caches by reading one value per 64-byte line of a large buffer. Reading, not writing:
    a written buffer leaves 128 MB of dirty lines whose write-back then competes with the timed call
    for DRAM (it halved the measured bandwidth of a memory-bound GEMV)."""
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.ones(_FLUSH_BYTES // 8, dtype=np.int64)
    return int(_flush_buffer[::8].sum())


def do_bench(fn, warmup=25, rep=100, n_warmup=0, n_repeat=0, flush_cache=True, return_mode="median", quantiles=None):
    """Runs fn() repeatedly and returns its time in milliseconds.

    warmup / rep are time budgets in ms (n_warmup / n_repeat, when > 0, are counts instead); the cache
    is flushed before every timed call unless flush_cache=False. return_mode: "median" (default),
    "mean", "min", "max" or "all"; quantiles=[...] returns those quantiles instead."""
    fn()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    estimate_ms = max((time.perf_counter() - t0) / 3 * 1e3, 1e-4)
    n_warmup = n_warmup if n_warmup > 0 else max(1, int(warmup / estimate_ms))
    n_repeat = n_repeat if n_repeat > 0 else max(1, int(rep / estimate_ms))
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        if flush_cache:
            _flush()
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times = np.asarray(times)
    if quantiles is not None:
        return [float(np.quantile(times, q)) for q in quantiles]
    if return_mode == "all":
        return times.tolist()
    return float({"median": np.median, "mean": np.mean, "min": np.min, "max": np.max}[return_mode](times))


class TensorSupplyType(enum.Enum):
    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def supply_tensor(shape, dtype, kind, rng):
    """A random (or constant) numpy array of the given tile-language dtype."""
    dt = numpy_dtype(dtype)
    if dtype == PACKED:  # random bytes: two float4 codes each, any code a valid value
        shape = storage_shape(dtype, shape, "Profiler", "input")
        return np.zeros(shape, dt) if kind == TensorSupplyType.Zero else rng.integers(-128, 128, shape).astype(dt)
    if kind == TensorSupplyType.Zero:
        return np.zeros(shape, dt)
    if kind == TensorSupplyType.One:
        return np.ones(shape, dt)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -4), min(info.max, 4) + 1, size=shape).astype(dt)
    if kind == TensorSupplyType.Integer:
        return rng.integers(-2, 3, size=shape).astype(np.float32).astype(dt)
    if kind == TensorSupplyType.Uniform:
        return rng.uniform(-1, 1, size=shape).astype(np.float32).astype(dt)
    return rng.standard_normal(shape).astype(np.float32).astype(dt)


class Profiler:
    """Benchmarks and checks one JITKernel on inputs it generates (or that the caller passes)."""

    def __init__(self, kernel, supply_type=TensorSupplyType.Auto, seed=0):
        self.kernel = kernel
        self.supply_type = supply_type
        self.rng = np.random.default_rng(seed)

    def _shapes(self):
        for p in self.kernel.params:
            if p.is_tensor and any(isinstance(d, str) for d in p.shape):
                raise InvalidArgumentError(f"Profiler: parameter '{p.name}' has dynamic dims {list(p.shape)}; pass "
                                           f"input_tensors explicitly")
        return [p.shape for p in self.kernel.params]

    def make_inputs(self):
        """Random inputs for the parameters that are not outputs (scalars: 1)."""
        shapes = self._shapes()
        kind = TensorSupplyType.Normal if self.supply_type == TensorSupplyType.Auto else self.supply_type
        inputs = []
        for i, (p, shape) in enumerate(zip(self.kernel.params, shapes)):
            if i in self.kernel.out_idx:
                continue
            inputs.append(_as_input(supply_tensor(shape, p.dtype, kind, self.rng)) if p.is_tensor else 1)
        return inputs

    def run_once(self, func=None, input_tensors=None):
        inputs = input_tensors if input_tensors is not None else self.make_inputs()
        return (func or self.kernel)(*inputs)

    def do_bench(self, func=None, warmup=25, rep=100, n_warmup=0, n_repeat=0, input_tensors=None, flush_cache=True,
                 return_mode="median", **_ignored):
        """Milliseconds per call of the kernel (func=None) or of func, on the same inputs."""
        inputs = input_tensors if input_tensors is not None else self.make_inputs()
        if func is None:
            # outputs allocated once, so the timing is the kernel's
            full, it = [], iter(inputs)
            probe = self.kernel(*inputs)
            outs = probe if isinstance(probe, list) else [probe]
            out_it = iter(outs)
            for i in range(len(self.kernel.params)):
                full.append(next(out_it) if i in self.kernel.out_idx else next(it))
            return do_bench(lambda: self.kernel.call_all(full), warmup, rep, n_warmup, n_repeat, flush_cache, return_mode)
        return do_bench(lambda: func(*inputs), warmup, rep, n_warmup, n_repeat, flush_cache, return_mode)

    def assert_allclose(self, reference_program, input_tensors=None, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01):
        """Runs the kernel and reference_program(*inputs) on the same inputs; raises AssertionError when
        more than max_mismatched_ratio of the elements differ by more than atol + rtol * |reference|."""
        inputs = input_tensors if input_tensors is not None else self.make_inputs()
        got = self.kernel(*inputs)
        want = reference_program(*inputs)
        got = got if isinstance(got, (list, tuple)) else [got]
        want = want if isinstance(want, (list, tuple)) else [want]
        if len(got) != len(want):
            raise AssertionError(f"kernel returned {len(got)} outputs, the reference {len(want)}")
        for k, (g, w) in enumerate(zip(got, want)):
            g64, w64 = _float64(g), _float64(w)
            if g64.shape != w64.shape:
                raise AssertionError(f"output {k}: shape {g64.shape} != reference {w64.shape}")
            bad = ~(np.abs(g64 - w64) <= atol + rtol * np.abs(w64))
            bad &= ~(np.isnan(g64) & np.isnan(w64))
            ratio = bad.mean() if bad.size else 0.0
            if ratio > max_mismatched_ratio:
                idx = np.unravel_index(np.argmax(bad), bad.shape)
                raise AssertionError(f"output {k}: {bad.sum()} of {bad.size} elements mismatch (ratio {ratio:.4f}); "
                                     f"first at {tuple(int(i) for i in idx)}: got {g64[idx]}, want {w64[idx]}")
