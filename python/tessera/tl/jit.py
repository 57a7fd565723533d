"""``@tessera.jit`` and ``tessera.tl.compile`` (TileLang's ``@tilelang.jit`` / ``tilelang.compile``)."""
import functools

from ..language import PrimFunc
from ..language._eager import annotated_params
from .._errors import InvalidArgumentError
from .eager import EagerJIT
from .kernel import JITKernel


def compile(func, out_idx=None, target="auto", execution_backend=None, pass_configs=None, compile_flags=None,  # noqa: A001
            cache_dir=None, **_ignored):
    """Compiles a @T.prim_func into a JITKernel (cached on disk and in memory)."""
    if not isinstance(func, PrimFunc):
        raise InvalidArgumentError(f"tessera.tl.compile: expected a @T.prim_func, got {type(func).__name__}")
    return JITKernel(func, out_idx=out_idx, compile_flags=compile_flags, cache_dir=cache_dir, target=target)


def jit(func=None, *, out_idx=None, target="auto", execution_backend=None, pass_configs=None, verbose=False,
        debug_root_path=None, compile_flags=None, cache_dir=None, **_ignored):
    """Decorates a kernel factory (a function returning a @T.prim_func) or a @T.prim_func.

    A factory becomes a function that returns the compiled JITKernel for its arguments (memoized per
    argument tuple; ``factory.compile(...)`` is the same call); a prim_func becomes its JITKernel. A
    function that annotates its tensor parameters in its own body (``A: T.Tensor(...)``, TileLang's
    eager style) becomes an EagerJIT: calling it with tensors compiles and runs the kernel.
    pass_configs and execution_backend are accepted for source compatibility and ignored; target must
    be "auto" or "cpu".
    """
    def decorate(f):
        options = dict(out_idx=out_idx, target=target, compile_flags=compile_flags, cache_dir=cache_dir)
        if isinstance(f, PrimFunc):
            return compile(f, **options)
        tensor_params = annotated_params(f)
        if tensor_params is not None:
            def compile_eager(prim, out_idx=None):
                return compile(prim, **dict(options, out_idx=out_idx if out_idx is not None else options["out_idx"]))

            return EagerJIT(f, tensor_params, options, compile_eager)
        memo = {}

        @functools.wraps(f)
        def factory(*args, **kwargs):
            try:
                key = (args, tuple(sorted(kwargs.items())))
                hash(key)
            except TypeError:
                key = None
            if key is not None and key in memo:
                return memo[key]
            prim = f(*args, **kwargs)
            if not isinstance(prim, PrimFunc):
                raise InvalidArgumentError(f"@tessera.jit: {f.__name__}() must return a @T.prim_func, got "
                                           f"{type(prim).__name__}")
            kernel = compile(prim, **options)
            if key is not None:
                memo[key] = kernel
            return kernel

        factory.__tl_factory__ = f
        factory.__tl_options__ = options
        factory.compile = factory
        return factory

    return decorate(func) if func is not None else decorate
