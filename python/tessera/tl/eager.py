"""``@tessera.jit`` over an eager-style function (the kernel body itself, TileLang's newer style; see
tessera.language._eager). Calling it with tensors compiles for their sizes (memoized) and runs;
``.compile(M=..., block_M=...)`` returns the JITKernel for given sizes without running it."""
import functools
import inspect

from .._errors import InvalidArgumentError
from ..language import _eager


def _key(items):
    try:
        key = tuple(sorted(items.items()))
        hash(key)
        return key
    except TypeError:
        return None


class EagerJIT:
    """The callable that @jit makes of an eager-style function."""

    def __init__(self, fn, tensor_params, options, compile_fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.signature = inspect.signature(fn)
        self.tensor_params = list(tensor_params)
        self.options = options
        self._compile = compile_fn
        self._plans = {}  # compile-time values -> (T.const plan, tensor dtypes)
        self._kernels = {}  # (compile-time values, constants) -> JITKernel

    def _split(self, bound):
        tensors = {n: bound.get(n) for n in self.tensor_params}
        statics = {n: v for n, v in bound.items() if n not in self.tensor_params}
        return tensors, statics

    def _bind(self, args, kwargs, partial):
        sig = self.signature
        try:
            b = sig.bind_partial(*args, **kwargs) if partial else sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"@jit '{self.__name__}': {e}") from None
        b.apply_defaults()
        return dict(b.arguments)

    def kernel(self, statics, consts):
        """The JITKernel for these compile-time values and T.const values (built once)."""
        skey, ckey = _key(statics), _key(consts)
        key = None if skey is None or ckey is None else (skey, ckey)
        if key is not None and key in self._kernels:
            return self._kernels[key]
        prim = _eager.build(self.fn, self.tensor_params, statics, consts)
        kernel = self._compile(prim, out_idx=prim.out_idx or None)
        if key is not None:
            self._kernels[key] = kernel
        return kernel

    def consts_of(self, statics, tensors):
        """The T.const values the tensor arguments' shapes give."""
        skey = _key(statics)
        plan = self._plans.get(skey) if skey is not None else None
        if plan is None:
            plan = _eager.discover(self.fn, self.tensor_params, statics)
            if skey is not None:
                self._plans[skey] = plan
        consts, source = {}, {}
        for name, pname, d in plan[0]:
            t = tensors.get(pname)
            if t is None or not hasattr(t, "shape"):
                raise InvalidArgumentError(f"@jit '{self.__name__}': argument '{pname}' must be a tensor (it is "
                                           f"annotated T.Tensor in the body), got {type(t).__name__}")
            if d >= len(t.shape):
                raise InvalidArgumentError(f"@jit '{self.__name__}': argument '{pname}' has {len(t.shape)} "
                                           f"dimensions, its annotation more")
            value = int(t.shape[d])
            if name in consts and consts[name] != value:
                raise InvalidArgumentError(
                    f"@jit '{self.__name__}': argument '{pname}' has dimension {d} = {value}, but T.const "
                    f"'{name}' is {consts[name]} from argument '{source[name][0]}' dimension {source[name][1]}")
            consts.setdefault(name, value)
            source.setdefault(name, (pname, d))
        return consts

    def __call__(self, *args, **kwargs):
        bound = self._bind(args, kwargs, partial=False)
        tensors, statics = self._split(bound)
        kernel = self.kernel(statics, self.consts_of(statics, tensors))
        return kernel(*[tensors[n] for n in self.tensor_params])

    def compile(self, *args, **kwargs):
        """The JITKernel for compile-time arguments and T.const values given by keyword
        (``matmul.compile(M=1024, N=1024, K=1024, block_M=128, ...)``)."""
        names = set(self.signature.parameters)
        consts = {k: v for k, v in kwargs.items() if k not in names}
        kwargs = {k: v for k, v in kwargs.items() if k in names}
        bound = self._bind(args, kwargs, partial=True)
        for n in self.tensor_params:
            bound.pop(n, None)
        missing = [n for n, p in self.signature.parameters.items()
                   if n not in self.tensor_params and n not in bound and p.default is inspect.Parameter.empty]
        if missing:
            raise TypeError(f"@jit '{self.__name__}'.compile(): missing compile-time arguments {missing}")
        return self.kernel(bound, consts)
