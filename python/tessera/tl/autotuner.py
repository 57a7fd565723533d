"""``@tessera.tl.autotune``: tries every config of a kernel factory, checks each candidate against a
reference, times the ones that pass and keeps the fastest - per argument tuple, in memory and on disk
(<kernel cache>/autotune/<key>.json), so a tuned shape is not tuned again."""
import functools
import hashlib
import json
import os

from .. import _C
from .._errors import TesseraRuntimeError
from .jit import compile as tl_compile
from .profiler import TensorSupplyType
from ..language import PrimFunc


def _kernel_for(factory, args, kwargs, config):
    made = factory(*args, **kwargs, **config)
    return tl_compile(made) if isinstance(made, PrimFunc) else made


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
    .config, .latency (ms) and, when ref_prog is given, .ref_latency set."""
    configs = [dict(c) for c in (configs() if callable(configs) else configs)]
    if not configs:
        raise ValueError("autotune: configs must not be empty")

    def decorate(factory):
        memo = {}

        @functools.wraps(factory)
        def tuned(*args, **kwargs):
            key = (args, tuple(sorted(kwargs.items())))
            if key in memo:
                return memo[key]
            path = _disk_path(factory, args, kwargs, configs)
            if cache_results and os.path.exists(path):
                with open(path) as f:
                    saved = json.load(f)
                kernel = _kernel_for(factory, args, kwargs, saved["config"])
                kernel.config, kernel.latency, kernel.ref_latency = saved["config"], saved["latency"], saved.get("ref_latency")
                memo[key] = kernel
                return kernel
            best, failures, inputs = None, [], None
            for config in configs:
                try:
                    kernel = _kernel_for(factory, args, kwargs, config)
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
                    json.dump({"config": config, "latency": latency, "ref_latency": kernel.ref_latency}, f)
                os.replace(tmp, path)
            memo[key] = kernel
            return kernel

        return tuned

    return decorate
