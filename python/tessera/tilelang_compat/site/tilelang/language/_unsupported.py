"""Named stubs for TileLang constructs that tessera's CPU target does not provide. Looking one up
works (so a module that defines kernels imports); using it raises NotImplementedInTessera naming the
construct and why, at the line of the kernel that uses it."""
from tessera._errors import NotImplementedInTessera
from tessera.language import _context as ctx

_SIMT = ("a CPU block runs its threads one after another (per-thread kernels are thread loops), so values "
         "cannot pass between the threads of a warp (write the block's work as tile ops / T.Parallel)")
_REASONS = {
    **{n: _SIMT for n in ("get_thread_bindings", "shfl_xor", "shfl_sync", "shfl_down", "shfl_up",
                          "warp_reduce_sum", "warp_reduce_max", "warp_reduce_min",
                          "alloc_barrier", "barrier_wait",
                          "barrier_arrive", "mbarrier_wait_parity", "mbarrier_arrive", "tma_copy", "tma_load",
                          "set_max_nreg", "dec_max_nreg", "inc_max_nreg")},
    **{n: "pointers into a buffer (and views of one with another element type) need new IR"
       for n in ("access_ptr", "address_of", "Ref")},
    **{n: "calls into CUDA device code / TVM intrinsics have no CPU counterpart"
       for n in ("call_extern", "call_intrin", "import_source", "dp4a", "ptx_mma", "ptx_ldmatrix")},
    **{n: "the CPU target has no such element type" for n in ("int4", "uint4", "float8_e4m3fnuz",
                                                              "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn",
                                                              "float6_e3m2fn")},
}


class Unsupported:
    """A TileLang construct that is not available here: calling it (or using it as a dtype) raises."""

    def __init__(self, name):
        self.__name__ = name

    def _error(self):
        reason = _REASONS.get(self.__name__, "it is not implemented by tessera")
        return ctx.not_implemented(f"T.{self.__name__} is not supported on tessera's CPU target: {reason}")

    def __call__(self, *args, **kwargs):
        raise self._error()

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise self._error()

    def __getitem__(self, item):
        raise self._error()

    def __repr__(self):
        return f"<unsupported T.{self.__name__}>"

    # Configuration code compares dtypes (`cfg.dtype == T.float4_e2m1fn`) before any kernel uses them:
    # two lookups of one name are equal, so such code takes its branch and the kernel then raises above.
    def __eq__(self, other):
        return isinstance(other, Unsupported) and other.__name__ == self.__name__

    def __hash__(self):
        return hash(("tilelang-unsupported", self.__name__))


def unsupported(name):
    return Unsupported(name)


__all__ = ["NotImplementedInTessera", "Unsupported", "unsupported"]
