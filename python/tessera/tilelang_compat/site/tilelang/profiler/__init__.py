"""``tilelang.profiler``: do_bench with TileLang's arguments on tessera's timer (wall clock; the
cache is flushed between runs)."""
from tessera.tl.profiler import Profiler, TensorSupplyType  # noqa: F401
from tessera.tl.profiler import do_bench as _do_bench


def do_bench(fn, warmup=25, rep=100, _n_warmup=0, _n_repeat=0, quantiles=None, fast_flush=True, backend=None,
             return_mode="mean", **_ignored):
    """Milliseconds per call of fn (TileLang's default: the mean). ``backend`` (event / cupti / cuda
    graphs) has no meaning on a CPU and is ignored."""
    return _do_bench(fn, warmup=warmup, rep=rep, n_warmup=_n_warmup, n_repeat=_n_repeat, flush_cache=fast_flush,
                     return_mode=return_mode, quantiles=quantiles)
