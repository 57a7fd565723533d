"""DeepGEMM's runtime knobs (DeepGEMM's API, docs/gemm.md).

``set_num_sms``/``get_num_sms`` are real: on the CPU an "SM" is a worker thread, so they set and read
tessera's thread count (shared by every tessera component). The others tune GPU kernels or their JIT
(tensor-core utilisation, programmatic dependent launch, compile-time dimensions, block-size
constraints); tessera keeps them as inert knobs that remember their value and keep DeepGEMM's
validation, so code that sets them runs unchanged. The contiguous-layout M/K alignment is real state:
the grouped GEMMs (passed to C++ as their layout's alignment), the grouped layouts they check and the
psum packing of scale factors read it. tessera's CPU kernels themselves need no alignment, so
``get_theoretical_mk_alignment_for_contiguous_layout`` answers 1; layouts must still follow the
configured value (default 128, DeepGEMM's).
"""
import numbers

import numpy as np

from .. import _C
from .._errors import ArgumentTypeError, InvalidArgumentError

_DEFAULT_MK_ALIGNMENT = 128


class _Knobs:
    tc_util = 0                 # 0 means "not set": get_tc_util() then reports 100
    pdl = False
    ignore_compile_dims = False
    block_size_multiple_of = (1, 1)
    mk_alignment = _DEFAULT_MK_ALIGNMENT


def _check_int(fn: str, arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be an int, got {type(value).__name__}")
    return int(value)


def _check_bool(fn: str, arg: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a bool, got {type(value).__name__}")
    return bool(value)


def set_num_sms(new_num_sms: int) -> None:
    """Number of worker threads GEMMs use, 0 = all logical CPUs (DeepGEMM: SMs, 0 = all)."""
    n = _check_int("set_num_sms", "new_num_sms", new_num_sms)
    limit = _C.cpu_info()["logical_cpus"]
    if not 0 <= n <= limit:
        raise InvalidArgumentError(f"set_num_sms: argument 'new_num_sms' must be in [0, {limit}] (worker "
                                   f"threads, 0 = all {limit} logical CPUs), got {n}")
    _C.set_num_sms(n)


def get_num_sms() -> int:
    """Number of worker threads GEMMs use."""
    return _C.get_num_sms()


def set_tc_util(new_tc_util: int) -> None:
    """Tensor-core utilisation hint in percent, 0..100 (0 = default). Inert on the CPU."""
    v = _check_int("set_tc_util", "new_tc_util", new_tc_util)
    if not 0 <= v <= 100:
        raise InvalidArgumentError(f"set_tc_util: argument 'new_tc_util' must be in [0, 100], got {v}")
    _Knobs.tc_util = v


def get_tc_util() -> int:
    """The tensor-core utilisation hint; 100 when unset (DeepGEMM's convention)."""
    return _Knobs.tc_util or 100


def set_pdl(new_enable_pdl: bool) -> None:
    """Programmatic dependent launch on/off. Inert on the CPU (kernels run back to back anyway)."""
    _Knobs.pdl = _check_bool("set_pdl", "new_enable_pdl", new_enable_pdl)


def get_pdl() -> bool:
    return _Knobs.pdl


def set_ignore_compile_dims(new_value: bool) -> None:
    """Makes the JIT ignore ``compiled_dims``. Inert: tessera kernels are compiled ahead of time."""
    _Knobs.ignore_compile_dims = _check_bool("set_ignore_compile_dims", "new_value", new_value)


def set_block_size_multiple_of(value) -> None:
    """Constrains the JIT's BLOCK_M/BLOCK_N to multiples of ``value`` (an int or a list of one or two
    ints: [m_and_n] or [m, n]). Inert: tessera's blocking comes from its cache-size plan."""
    fn = "set_block_size_multiple_of"
    items = [value] if isinstance(value, numbers.Integral) and not isinstance(value, bool) else list(value)
    if len(items) not in (1, 2):
        raise InvalidArgumentError(f"{fn}: argument 'value' must hold 1 or 2 ints, got {len(items)}")
    ints = [_check_int(fn, "value", v) for v in items]
    if any(v <= 0 for v in ints):
        raise InvalidArgumentError(f"{fn}: argument 'value' must be positive, got {ints}")
    _Knobs.block_size_multiple_of = (ints[0], ints[-1])


def set_mk_alignment_for_contiguous_layout(new_value: int) -> None:
    """Row (M-grouped) or K (K-grouped) alignment of each group in contiguous grouped layouts."""
    v = _check_int("set_mk_alignment_for_contiguous_layout", "new_value", new_value)
    if not 0 < v < 2 ** 31:
        raise InvalidArgumentError("set_mk_alignment_for_contiguous_layout: argument 'new_value' must be "
                                   f"positive (and below 2^31), got {v}")
    _Knobs.mk_alignment = v


def get_mk_alignment_for_contiguous_layout() -> int:
    """The contiguous-layout group alignment (default 128)."""
    return _Knobs.mk_alignment


get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m=None, num_groups=None) -> int:
    """The smallest group alignment the GEMM kernels need. DeepGEMM answers its BLOCK_M (SM90: 128;
    SM100: 224 stepping down by 32 towards ``expected_m``); tessera's CPU kernels handle any row or K
    offset, so the answer is 1 whatever the hint. Callers that build layouts with it should also
    pass it to set_mk_alignment_for_contiguous_layout, which is what the GEMMs check layouts against.
    ``expected_m`` and ``num_groups`` (a newer DeepGEMM's hint) must be None or ints >= 0."""
    fn = "get_theoretical_mk_alignment_for_contiguous_layout"
    for arg, value in (("expected_m", expected_m), ("num_groups", num_groups)):
        if value is not None and _check_int(fn, arg, value) < 0:
            raise InvalidArgumentError(f"{fn}: argument '{arg}' must be >= 0, got {value}")
    return 1
