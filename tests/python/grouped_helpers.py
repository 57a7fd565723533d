"""Shared helpers of the grouped / K-grouped / einsum tests: quantisation recipes with their float64
dequantised values, grouped layouts (per-row ids, psum ends), poisoning and thread-count sweeps."""
import contextlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import tessera
from tessera import deep_gemm
from tessera.deep_gemm.testing import assert_bitwise_equal, calc_diff

BF16 = np.dtype(ml_dtypes.bfloat16)
POISON = -7.25  # no GEMM here produces it
THREAD_COUNTS = (1, 2, 3)


@dataclass(frozen=True)
class Quant:
    """How A and B are quantised and how the GEMM is told (DeepGEMM's API, docs/gemm.md and DeepGEMM's tests)."""
    name: str
    a_fp4: bool
    b_fp4: bool
    gran_k_a: int
    gran_k_b: int
    b_block: bool       # B scaled per 128x128 block (else per row)
    recipe_kwargs: dict
    threshold: float    # DeepGEMM's calc_diff bound against the unquantised product

    def __repr__(self):
        return self.name


QUANTS = [
    Quant("fp8xfp8", False, False, 128, 128, True, {}, 1e-3),
    Quant("fp8xfp8_1d1d", False, False, 128, 128, False, {"recipe": (1, 1, 128)}, 1e-3),
    Quant("fp8xfp4", False, True, 128, 32, False, {"recipe_a": (1, 128), "recipe_b": (1, 32)}, 1e-2),
    Quant("fp4xfp4", True, True, 32, 32, False, {"recipe_a": (1, 32), "recipe_b": (1, 32)}, 2e-2),
]
SF_STYLES = ("fp32", "ue8m0")


def f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def poisoned(shape, dtype=BF16) -> np.ndarray:
    return np.full(shape, POISON, np.float32).astype(dtype)


def bits(x) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


@contextlib.contextmanager
def mk_alignment(value: int):
    saved = deep_gemm.get_mk_alignment_for_contiguous_layout()
    deep_gemm.set_mk_alignment_for_contiguous_layout(value)
    try:
        yield value
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(saved)


def over_thread_counts(call):
    """Runs call() (which returns an output array) at 1, 2 and 3 threads; returns the outputs."""
    saved = tessera.num_threads()
    try:
        outs = []
        for n in THREAD_COUNTS:
            tessera.set_num_threads(n)
            outs.append(np.array(call(), copy=True))
        return outs
    finally:
        tessera.set_num_threads(saved)


def assert_same_bits_across_threads(call):
    outs = over_thread_counts(call)
    for n, out in zip(THREAD_COUNTS[1:], outs[1:]):
        try:
            assert_bitwise_equal(out, outs[0])
        except AssertionError as e:
            raise AssertionError(f"{n} threads vs 1 thread: {e}") from None


def check_diff(d, ref, deq_ref, threshold, what, deq_threshold=1e-5):
    """DeepGEMM's check against the unquantised product, and a tight one against the product of the
    dequantised operands (catches scale-indexing mistakes the loose one tolerates)."""
    diff, diff_deq = calc_diff(d, ref), calc_diff(d, deq_ref)
    print(f"{what}: diff={diff:.2e} (< {threshold:g}) vs dequantised={diff_deq:.2e} (< {deq_threshold:g})")
    assert diff < threshold
    assert diff_deq < deq_threshold


# ---- quantised operands ----

def quantise_rows(x: np.ndarray, fp4: bool, gran_k: int, block: bool, ue8m0: bool):
    """x [R, K] float32 -> (data, sf float32 [ceil(R/gran_mn), ceil(K/gran_k)], dequantised float64)."""
    r, k = x.shape
    if fp4:
        q, sf = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=ue8m0, gran_k=gran_k)
        return q, sf, f64(deep_gemm.cast_back_from_fp4(q, sf, gran_k=gran_k))
    if block:
        q, sf = deep_gemm.per_block_cast_to_fp8(x, use_ue8m0=ue8m0, gran_k=gran_k)
        return q, sf, f64(q) * f64(sf)[np.arange(r) // gran_k][:, np.arange(k) // gran_k]
    q, sf = deep_gemm.per_token_cast_to_fp8(x, use_ue8m0=ue8m0, gran_k=gran_k)
    return q, sf, f64(q) * f64(sf)[:, np.arange(k) // gran_k]


def quantise_groups(x: np.ndarray, fp4: bool, gran_k: int, block: bool, ue8m0: bool):
    """x [G, R, K] -> stacked (data, sf, dequantised) of quantise_rows per group."""
    parts = [quantise_rows(g, fp4, gran_k, block, ue8m0) for g in x]
    return tuple(np.stack(p) for p in zip(*parts))


def pack_sf(sf, quant_block_rows: int, mn: int, psum_layout=None):
    """float32 SF [(G,) ceil(MN/rows), SFK] -> the packed UE8M0 int32 layout the SM100 kernels take
    (rows broadcast to one per MN index first)."""
    if quant_block_rows != 1:
        sf = sf[..., np.arange(mn) // quant_block_rows, :]
    return deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(np.ascontiguousarray(sf), psum_layout)


def nn_of(b_data, b_sf, fp4: bool):
    """B [G, N, K] data and SF -> the 'nn' form: data [G, K, N] (packed FP4: along N) and SF with its
    last two dimensions transposed (a view)."""
    if fp4:
        data = np.stack([deep_gemm.transpose_packed_fp4(g) for g in b_data])
    else:
        data = np.ascontiguousarray(b_data.transpose(0, 2, 1))
    return data, b_sf.swapaxes(-1, -2)


# ---- grouped layouts ----

def contiguous_layout(sizes, alignment: int, psum: bool):
    """Rows of each group placed at aligned starts. Returns (grouped_layout int32, M_sum, row_group)
    where row_group[r] is r's group or -1 (padding / gap rows); psum layouts leave rows after the
    last end as a gap too (M_sum is the aligned total)."""
    starts, start = [], 0
    for s in sizes:
        starts.append(start)
        start = -(-(start + s) // alignment) * alignment
    m_sum = start
    row_group = np.full(m_sum, -1, np.int32)
    for g, (s0, s) in enumerate(zip(starts, sizes)):
        row_group[s0:s0 + s] = g
    if psum:
        return np.array([s0 + s for s0, s in zip(starts, sizes)], np.int32), m_sum, row_group
    return row_group.copy(), m_sum, row_group
