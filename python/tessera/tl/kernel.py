"""JITKernel: a compiled tile-language program you call like a function (TileLang's JITKernel)."""
import numpy as np

from .. import _C
from .._arrays import BITS_CARRIERS, dtype_name, is_torch_tensor, like, to_ref
from .._errors import InvalidArgumentError
from ..language._dim_formulas import bind_formulas, check_formulas
from ._dtypes import logical_shape, numpy_dtype, storage_shape


def _normalize_out_idx(out_idx, n):
    if out_idx is None:
        return []
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    result = []
    for i in out_idx:
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise InvalidArgumentError(f"tessera.jit: out_idx {i} is out of range for {n} parameters")
        result.append(j)
    return sorted(set(result))


class JITKernel:
    """A compiled kernel. Call it with the inputs (the parameters not in out_idx); it allocates the
    outputs (numpy arrays, or torch tensors when an input is a torch tensor), runs, and returns them
    (one output: the array; several: a list; none: None)."""

    def __init__(self, func, out_idx=None, compile_flags=None, cache_dir=None, target="auto"):
        if target not in ("auto", "cpu", "c", "llvm", None):
            raise InvalidArgumentError(f"tessera.jit: target {target!r} is not available; this build has the CPU target "
                                       f"('auto' / 'cpu')")
        self.func = func
        self._all_params = func.params
        # T.alloc_global scratch tensors are parameters of the program but not of the kernel's callers
        self.params = [p for p in func.params if getattr(p, "role", "input") != "scratch"]
        self._scratch = {}  # shapes -> the scratch arrays of the last call with those shapes
        self.out_idx = _normalize_out_idx(out_idx, len(self.params))
        for i in self.out_idx:
            if not self.params[i].is_tensor:
                raise InvalidArgumentError(f"tessera.jit: out_idx {i} names the scalar parameter '{self.params[i].name}'")
        check_formulas(func.name, self._all_params)
        self._has_formulas = any(p.formulas for p in self._all_params if p.is_tensor)
        self._kernel = _C.tl_compile(func.program, list(compile_flags or []), cache_dir or "", True)
        self.config = None
        self.latency = None
        self.ref_latency = None

    @property
    def name(self):
        return self.func.name

    @property
    def library_path(self):
        return self._kernel.library_path

    @property
    def compile_stats(self):
        """lower_ms, codegen_ms, compile_ms, load_ms, disk_cache_hit, memory_cache_hit."""
        return dict(self._kernel.stats)

    def get_kernel_source(self):
        """The generated C++ of this kernel."""
        return self._kernel.source

    def get_host_source(self):
        return self._kernel.source

    def export_library(self, path):
        """Writes a standalone kernel library (load it from C++ with tessera::tl::Kernel::load)."""
        _C.tl_compile_to_library(self.func.program, str(path), [])

    def get_profiler(self, tensor_supply_type=None):
        from .profiler import Profiler, TensorSupplyType

        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto)

    def _bind_symbols(self, args_by_param):
        symbols = {}
        for p, a in zip(self.params, args_by_param):
            if a is None or not p.is_tensor:
                continue
            shape = logical_shape(p.dtype, a.shape)
            for d, dim in enumerate(p.shape):
                if isinstance(dim, str) and d < len(shape):
                    symbols.setdefault(dim, int(shape[d]))
        return bind_formulas(self.name, self._all_params, symbols)

    def output_shape(self, param, symbols, what="output"):
        shape = []
        for dim in param.shape:
            if isinstance(dim, str):
                if dim not in symbols:
                    raise InvalidArgumentError(f"kernel '{self.name}': cannot size {what} '{param.name}': dynamic "
                                               f"dimension {dim} is not a dimension of any input")
                shape.append(symbols[dim])
            else:
                shape.append(dim)
        return tuple(shape)

    def __call__(self, *args):
        n_in = len(self.params) - len(self.out_idx)
        if len(args) != n_in:
            names = [p.name for i, p in enumerate(self.params) if i not in self.out_idx]
            raise InvalidArgumentError(f"kernel '{self.name}': expected {n_in} inputs ({', '.join(names)}), got {len(args)}")
        full, it = [], iter(args)
        for i in range(len(self.params)):
            full.append(None if i in self.out_idx else next(it))
        symbols = self._bind_symbols(full)
        reference = next((a for a in args if is_torch_tensor(a)), None)
        outputs = []
        for i in self.out_idx:
            p = self.params[i]
            shape = storage_shape(p.dtype, self.output_shape(p, symbols), f"kernel '{self.name}'", p.name)
            out = like(np.empty(shape, dtype=numpy_dtype(p.dtype)), reference)
            full[i] = out
            outputs.append(out)
        self.call_all(full)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def _fill_absent(self, args):
        """None for a tensor argument (TileLang passes a null pointer for an optional tensor the kernel
        does not touch): a zero-filled tensor of the declared shape, sized from the other arguments. When
        some tensor is given, a dynamic dimension that only absent tensors have is 0 (nothing reads them)."""
        symbols = self._bind_symbols(args)
        filled = list(args)
        some_given = any(a is not None and p.is_tensor for p, a in zip(self.params, args))
        for i, (p, a) in enumerate(zip(self.params, args)):
            if a is None and p.is_tensor:
                if some_given:
                    symbols.update({d: 0 for d in p.shape if isinstance(d, str) and d not in symbols})
                shape = self.output_shape(p, symbols, "the absent (None) argument")
                filled[i] = np.zeros(storage_shape(p.dtype, shape, f"kernel '{self.name}'", p.name),
                                     dtype=numpy_dtype(p.dtype))
        return filled

    def _with_scratch(self, args):
        """(parameter, argument) for every program parameter. Scratch tensors are allocated here,
        zeroed once and reused by later calls with the same shapes (so one kernel object must not be
        called from two threads at once when its program has T.alloc_global tensors)."""
        if len(self._all_params) == len(self.params):
            return zip(self.params, args)
        symbols = self._bind_symbols(args)
        shapes = tuple(self.output_shape(p, symbols) for p in self._all_params if p.role == "scratch")
        scratch = self._scratch.get(shapes)
        if scratch is None:
            scratch = [np.zeros(storage_shape(p.dtype, shape, f"kernel '{self.name}'", p.name),
                                dtype=numpy_dtype(p.dtype))
                       for p, shape in zip((p for p in self._all_params if p.role == "scratch"), shapes)]
            self._scratch = {shapes: scratch}
        it_args, it_scratch = iter(args), iter(scratch)
        return [(p, next(it_scratch) if p.role == "scratch" else next(it_args)) for p in self._all_params]

    def _tensor_ref(self, p, a):
        fn = f"kernel '{self.name}'"
        if hasattr(a, "dtype") and (p.dtype in BITS_CARRIERS or dtype_name(a) in BITS_CARRIERS) \
                and dtype_name(a) != p.dtype:  # they cross as their carrier type: the library cannot tell
            raise InvalidArgumentError(f"{fn}: argument '{p.name}' must have dtype {p.dtype}, got {a.dtype}")
        return to_ref(a, fn, p.name, writable=True, bits_carriers=True)

    def call_all(self, args):
        """Runs with every parameter given (outputs included), in parameter order."""
        if len(args) != len(self.params):
            raise InvalidArgumentError(f"kernel '{self.name}': expected {len(self.params)} arguments, got {len(args)}")
        if any(a is None for p, a in zip(self.params, args) if p.is_tensor):
            args = self._fill_absent(args)
        if self._has_formulas:  # sizes declared as expressions: the library cannot check them itself
            self._bind_symbols(args)
        refs = []
        for p, a in self._with_scratch(args):
            if p.is_tensor:
                refs.append(self._tensor_ref(p, a))
            elif isinstance(a, (bool, int, np.integer)):
                refs.append(int(a))
            elif isinstance(a, (float, np.floating)):
                refs.append(float(a))
            else:
                raise InvalidArgumentError(f"kernel '{self.name}': argument '{p.name}' must be a Python number, got "
                                           f"{type(a).__name__}")
        self._kernel(refs)
