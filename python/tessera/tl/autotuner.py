"""``@tessera.tl.autotune``: tries every config of a kernel factory, checks each candidate against a
reference, times the ones that pass and keeps the fastest - per argument tuple, in memory and on disk
(<kernel cache>/autotune/<key>.json), so a tuned shape is not tuned again."""
import functools
import hashlib
import inspect
import json
import os

from .. import _C
from .._errors import TesseraRuntimeError
from .eager import EagerJIT
from .jit import compile as tl_compile
from .profiler import TensorSupplyType, do_bench
from ..language import PrimFunc


def _kernel_for(factory, args, kwargs, config):
    made = factory(*args, **kwargs, **config)
    return tl_compile(made) if isinstance(made, PrimFunc) else made


def _given_tunables(factory, configs, args, kwargs):
    """The tuned parameters the caller passed itself (TileLang then compiles that config untuned)."""
    tunables = {k for c in configs for k in c}
    given = tunables & set(kwargs)
    try:
        names = list(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        names = []
    given |= tunables & set(names[:len(args)])
    return given


def _tune_eager(factory, configs, args, kwargs, warmup, rep, ref_prog, atol, rtol, skip_check):
    """Tunes an eager-style kernel on the caller's own tensors; returns the best call's outputs."""
    import numpy as np

    from .._arrays import to_numpy

    best, failures = None, []
    for config in configs:
        try:
            bound = factory._bind(args, {**kwargs, **config}, partial=False)
            tensors, statics = factory._split(bound)
            inputs = [tensors[n] for n in factory.tensor_params]
            kernel = factory.kernel(statics, factory.consts_of(statics, tensors))
            if ref_prog is not None and not skip_check:
                got, want = kernel(*inputs), ref_prog(*inputs)
                got = got if isinstance(got, (list, tuple)) else [got]
                want = want if isinstance(want, (list, tuple)) else [want]
                for g, w in zip(got, want):
                    np.testing.assert_allclose(to_numpy(g).astype(np.float64), to_numpy(w).astype(np.float64),
                                               atol=atol, rtol=rtol)
            latency = do_bench(lambda: kernel(*inputs), warmup=warmup, rep=rep)
        except Exception as e:  # a config that does not compile or is wrong is skipped, with its reason
            failures.append(f"{config}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            continue
        if best is None or latency < best[1]:
            best = (kernel, latency, config, inputs)
    if best is None:
        raise TesseraRuntimeError("autotune: no config compiled and passed the check:\n  " + "\n  ".join(failures))
    kernel, latency, config, inputs = best
    kernel.config, kernel.latency, kernel.autotune_failures = config, latency, failures
    return kernel(*inputs)


def _disk_path(factory, args, kwargs, configs):
    key = json.dumps([getattr(factory, "__module__", ""), getattr(factory, "__qualname__", ""), repr(args),
                      repr(sorted(kwargs.items())), repr(configs)], sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return os.path.join(_C.tl_cache_dir(""), "autotune", digest + ".json")


def autotune(configs, warmup=25, rep=100, timeout=None, supply_type=TensorSupplyType.Auto, ref_prog=None, atol=1e-2,
             rtol=1e-2, max_mismatched_ratio=0.01, skip_check=False, cache_input_tensors=True, cache_results=True,
             **_ignored):
    """Decorates a kernel factory (usually a @tessera.jit one) whose keyword arguments include the
    tunable parameters. Calling it with the other arguments returns the best JITKernel, with
    .config, .latency (ms) and, when ref_prog is given, .ref_latency set.

    When the caller passes a tuned parameter itself, nothing is tuned: the factory is called with the
    caller's arguments (TileLang does the same). An eager-style kernel (see tessera.tl.eager) is tuned
    on the tensors of the call, and the call returns the outputs of the fastest config; its
    ``.compile(N=..., ...)`` tunes on the profiler's inputs of those sizes and returns the best kernel."""
    configs = [dict(c) for c in (configs() if callable(configs) else configs)]
    if not configs:
        raise ValueError("autotune: configs must not be empty")

    def decorate(factory):
        memo = {}

        def tune(make_kernel, args, kwargs):
            """The fastest kernel of make_kernel(config) over the configs (memoized, cached on disk)."""
            key = (args, tuple(sorted(kwargs.items())))
            if key in memo:
                return memo[key]
            path = _disk_path(factory, args, kwargs, configs)
            if cache_results and os.path.exists(path):
                with open(path) as f:
                    saved = json.load(f)
                kernel = make_kernel(saved["config"])
                kernel.config, kernel.latency, kernel.ref_latency = saved["config"], saved["latency"], saved.get("ref_latency")
                kernel.autotune_failures = saved.get("failures", [])  # the configs skipped when it was tuned
                memo[key] = kernel
                return kernel
            best, failures, inputs = None, [], None
            for config in configs:
                try:
                    kernel = make_kernel(config)
                    profiler = kernel.get_profiler(supply_type)
                    if inputs is None or not cache_input_tensors:
                        inputs = profiler.make_inputs()
                    if ref_prog is not None and not skip_check:
                        profiler.assert_allclose(ref_prog, input_tensors=inputs, atol=atol, rtol=rtol,
                                                 max_mismatched_ratio=max_mismatched_ratio)
                    latency = profiler.do_bench(warmup=warmup, rep=rep, input_tensors=inputs)
                except Exception as e:  # a config that does not compile or is wrong is skipped, with its reason
                    failures.append(f"{config}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                    continue
                if best is None or latency < best[1]:
                    best = (kernel, latency, config, profiler)
            if best is None:
                raise TesseraRuntimeError("autotune: no config compiled and passed the check:\n  " + "\n  ".join(failures))
            kernel, latency, config, profiler = best
            kernel.config, kernel.latency = config, latency
            if ref_prog is not None:
                kernel.ref_latency = profiler.do_bench(ref_prog, warmup=warmup, rep=rep, input_tensors=inputs)
            kernel.autotune_failures = failures
            if cache_results:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = f"{path}.tmp-{os.getpid()}"
                with open(tmp, "w") as f:
                    json.dump({"config": config, "latency": latency, "ref_latency": kernel.ref_latency,
                               "failures": failures}, f)
                os.replace(tmp, path)
            memo[key] = kernel
            return kernel

        @functools.wraps(factory)
        def tuned(*args, **kwargs):
            if _given_tunables(factory, configs, args, kwargs):
                return factory(*args, **kwargs)
            if isinstance(factory, EagerJIT):
                return _tune_eager(factory, configs, args, kwargs, warmup, rep, ref_prog, atol, rtol, skip_check)
            return tune(lambda config: _kernel_for(factory, args, kwargs, config), args, kwargs)

        def compile_eager(*args, **kwargs):
            """``.compile(N=..., K=...)`` of a tuned eager kernel: tunes the configs on inputs of those
            sizes (the profiler's) and returns the fastest JITKernel; with a tuned parameter given, that
            config's kernel untuned."""
            if _given_tunables(factory, configs, args, kwargs):
                return factory.compile(*args, **kwargs)
            return tune(lambda config: factory.compile(*args, **kwargs, **config), args, kwargs)

        tuned.compile = compile_eager if isinstance(factory, EagerJIT) else tuned
        return tuned

    return decorate
