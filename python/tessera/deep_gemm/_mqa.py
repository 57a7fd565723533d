"""DeepGEMM's MQA logits (the lightning indexer of DeepSeek sparse attention); docs/attention.md.

    logits[i, j] = sum_h weights[i, h] * relu(score(q[i, h], kv[j]))

FP8 (``q_sf is None``): q float8_e4m3fn [S, H, D] without scale, kv = (float8_e4m3fn [S_kv, D],
float32 [S_kv] token scales), score = (q . k) * kv_sf[j]. MX (``q_sf`` given): q and kv are
float8_e4m3fn or packed FP4 (int8/uint8, two e2m1 per byte), with int32 scales holding four UE8M0
exponents (one per 32 values of D): q_sf [S, H], kv_sf [S_kv]. H in [1, 128], D in {32, 64, 128}
(32 only for FP8). weights float32 [S, H], or bfloat16 with bfloat16 logits.

The functions allocate and return the logits (row stride padded to 1 KiB, like DeepGEMM, so they may
be non-contiguous views). Entries DeepGEMM leaves unspecified (outside [ks, ke) without
``clean_logits``, past ``ke - ks`` in compressed mode, past the context length in paged mode without
``clean_logits``) are not written: they hold whatever the fresh buffer held. Every element is computed
in a fixed order, so repeated calls and any thread count give the same bits. ``indices`` (varlen paged
logits) is checked and gives the logits of the rows alone. FP4 operands are converted to bf16 exactly (with their
power-of-two scales) and use the same kernels as FP8.
"""
import ml_dtypes
import numpy as np

from .. import _C
from .._arrays import is_torch_tensor, new_output, optional_ref, to_numpy, to_ref, torch_module
from .._errors import ArgumentTypeError, InvalidArgumentError, out_of_memory
from ._runtime import _check_bool, _check_int

__all__ = [
    "fp8_fp4_mqa_logits",
    "fp8_mqa_logits",
    "get_paged_mqa_logits_metadata",
    "fp8_fp4_paged_mqa_logits",
    "fp8_paged_mqa_logits",
]

_ROW_ALIGN_BYTES = 1024


def _logits_dtype_name(fn: str, logits_dtype) -> str:
    torch = torch_module()
    if torch is not None and isinstance(logits_dtype, torch.dtype):
        names = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
        if logits_dtype in names:
            return names[logits_dtype]
    else:
        try:
            dt = np.dtype(logits_dtype)
        except TypeError:
            dt = None
        if dt is not None and dt in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)):
            return dt.name
    raise InvalidArgumentError(f"{fn}: argument 'logits_dtype' must be float32 or bfloat16, got {logits_dtype!r}")


def _empty_logits(fn: str, rows: int, cols: int, dtype_name: str, like_input):
    """[rows, cols] whose row stride is padded to 1 KiB, as DeepGEMM allocates its logits."""
    itemsize = 4 if dtype_name == "float32" else 2
    per_row = _ROW_ALIGN_BYTES // itemsize
    padded = max(per_row, (cols + per_row - 1) // per_row * per_row)
    if is_torch_tensor(like_input):
        torch = torch_module()
        try:
            return torch.empty((rows, padded), dtype=getattr(torch, dtype_name))[:, :cols]
        except (MemoryError, RuntimeError):  # torch's allocator raises RuntimeError when out of memory
            raise out_of_memory(fn, "the logits", (rows, padded), itemsize) from None
    np_dtype = np.float32 if dtype_name == "float32" else ml_dtypes.bfloat16
    return new_output(fn, "the logits", (rows, padded), np_dtype)[:, :cols]


def _pair(fn: str, arg: str, value, optional_second: bool):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ArgumentTypeError(f"{fn}: argument '{arg}' must be a (data, scale_factors) pair, got {type(value).__name__}")
    if value[1] is None and not optional_second:
        raise InvalidArgumentError(f"{fn}: argument '{arg}' needs its scale factors, got None")
    return value


def fp8_fp4_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits=True, max_seqlen_k=0,
                       logits_dtype=np.float32):
    """MQA logits of q = (q_data [S, H, D], q_sf or None) against kv = (kv_data [S_kv, D], kv_sf [S_kv]).

    Query i sees keys [cu_seq_len_k_start[i], cu_seq_len_k_end[i]) (int32 [S], clipped to [0, S_kv)).
    max_seqlen_k == 0: returns [S, S_kv]; clean_logits writes exact -inf outside each range.
    max_seqlen_k > 0 (compressed, needs clean_logits=False): returns [S, max_seqlen_k] with
    out[i, t] = logits[i, ks[i] + t] for t < ke[i] - ks[i]. logits_dtype: float32 or bfloat16.
    """
    fn = "fp8_fp4_mqa_logits"
    clean = _check_bool(fn, "clean_logits", clean_logits)
    max_k = _check_int(fn, "max_seqlen_k", max_seqlen_k)
    q_data, q_sf = _pair(fn, "q", q, True)
    kv_data, kv_sf = _pair(fn, "kv", kv, False)
    dtype_name = _logits_dtype_name(fn, logits_dtype)
    q_ref, kv_ref = to_ref(q_data, fn, "q"), to_ref(kv_data, fn, "kv")
    if len(q_ref.shape) != 3 or len(kv_ref.shape) != 2:
        raise InvalidArgumentError(f"{fn}: arguments 'q' and 'kv' must be [S, H, D] and [S_kv, D], got shapes "
                                   f"{list(q_ref.shape)} and {list(kv_ref.shape)}")
    if max_k < 0:
        raise InvalidArgumentError(f"{fn}: argument 'max_seqlen_k' must be >= 0, got {max_k}")
    logits = _empty_logits(fn, q_ref.shape[0], max_k if max_k > 0 else kv_ref.shape[0], dtype_name, q_data)
    _C.fp8_fp4_mqa_logits(q_ref, optional_ref(q_sf, fn, "q_sf"), kv_ref, to_ref(kv_sf, fn, "kv_sf"),
                          to_ref(weights, fn, "weights"), to_ref(cu_seq_len_k_start, fn, "cu_seq_len_k_start"),
                          to_ref(cu_seq_len_k_end, fn, "cu_seq_len_k_end"), to_ref(logits, fn, "logits", writable=True),
                          clean, max_k)
    return logits


def fp8_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits=True, max_seqlen_k=0):
    """DeepGEMM's legacy name: FP8 q without scale factors and float32 logits."""
    return fp8_fp4_mqa_logits((q, None), kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                              max_seqlen_k, np.float32)


def _check_varlen_indices(fn, indices, rows, next_n):
    """indices: int32 [rows], each row's sequence, >= 0 and non-decreasing; varlen rows are single tokens."""
    v = to_numpy(indices)
    if v.dtype != np.int32 or v.ndim != 1 or v.shape[0] != rows:
        raise InvalidArgumentError(f"{fn}: argument 'indices' must be int32 [{rows}] (one sequence index per row), "
                                   f"got {v.dtype} {list(v.shape)}")
    if next_n != 1:
        raise InvalidArgumentError(f"{fn}: with 'indices' (varlen) every row is one token: next_n must be 1, got {next_n}")
    if v.size and (v.min() < 0 or np.any(np.diff(v) < 0)):
        raise InvalidArgumentError(f"{fn}: argument 'indices' must be >= 0 and non-decreasing (rows of a sequence "
                                   "are adjacent)")


def get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms, indices=None):
    """The schedule DeepGEMM's paged kernel reads: int32 [num_sms + 1, 2], entry t = (request, page)
    where worker t starts when the pages every request reads are split into num_sms equal shares;
    the last entry is (batch_size, 0). context_lens: int32 [B] or [B, next_n]. ``indices`` (varlen
    decode, see fp8_fp4_paged_mqa_logits) is checked against context_lens; the schedule is the same."""
    fn = "get_paged_mqa_logits_metadata"
    if indices is not None:
        _check_varlen_indices(fn, indices, int(context_lens.shape[0]), 1)
    block_kv = _check_int(fn, "block_kv", block_kv)
    if not 1 <= block_kv <= 1 << 20:
        raise InvalidArgumentError(f"{fn}: argument 'block_kv' must be in [1, 2^20], got {block_kv}")
    num_sms = _check_int(fn, "num_sms", num_sms)
    if not 1 <= num_sms <= 1 << 20:
        raise InvalidArgumentError(f"{fn}: argument 'num_sms' must be in [1, 2^20], got {num_sms}")
    out = np.empty((num_sms + 1, 2), dtype=np.int32)
    _C.get_paged_mqa_logits_metadata(to_ref(context_lens, fn, "context_lens"), block_kv, num_sms,
                                     to_ref(out, fn, "out", writable=True))
    if is_torch_tensor(context_lens):
        return torch_module().from_numpy(out)
    return out


def fp8_fp4_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                             clean_logits=False, logits_dtype=np.float32, indices=None):
    """Decode logits over a paged cache. q = (q_data [B, next_n, H, D], q_sf or None); kv_cache uint8
    [num_blocks, block_kv, 1, D + 4] (per page: block_kv * D value bytes, then block_kv scales);
    weights [B * next_n, H]; context_lens int32 [B, next_n] (tokens each query sees) or [B] (the
    causal last next_n positions of a request of that length); block_table int32 [B, max_blocks];
    schedule_meta from get_paged_mqa_logits_metadata for these context_lens (checked entry by entry).
    Returns [B * next_n, max_context_len]; with clean_logits the positions at or past a query's length
    are exactly -inf.

    Varlen (``indices`` int32 [B]): the B rows are single tokens (next_n == 1) of fewer sequences,
    indices[i] being row i's sequence (non-decreasing, >= 0); context_lens and block_table give each row
    its own length and pages, as DeepGEMM's varlen callers pass them. Rows are computed independently,
    so the logits equal the call without indices (on a GPU, indices let rows of one sequence share KV
    loads)."""
    fn = "fp8_fp4_paged_mqa_logits"
    clean = _check_bool(fn, "clean_logits", clean_logits)
    max_len = _check_int(fn, "max_context_len", max_context_len)
    if max_len < 0:
        raise InvalidArgumentError(f"{fn}: argument 'max_context_len' must be >= 0, got {max_len}")
    q_data, q_sf = _pair(fn, "q", q, True)
    dtype_name = _logits_dtype_name(fn, logits_dtype)
    q_ref = to_ref(q_data, fn, "q")
    if len(q_ref.shape) != 4:
        raise InvalidArgumentError(f"{fn}: argument 'q' must be [B, next_n, H, D], got shape {list(q_ref.shape)}")
    if indices is not None:
        _check_varlen_indices(fn, indices, q_ref.shape[0], q_ref.shape[1])
    # The logits are allocated here, before the native checks: bound their width by what a block_table
    # row can address, so a wrong max_context_len fails with a message instead of a huge allocation.
    kv_ref, table_ref = to_ref(kv_cache, fn, "kv_cache"), to_ref(block_table, fn, "block_table")
    if len(kv_ref.shape) >= 2 and len(table_ref.shape) == 2 and max_len > kv_ref.shape[1] * table_ref.shape[1]:
        raise InvalidArgumentError(
            f"{fn}: argument 'max_context_len' ({max_len}) must not exceed the tokens a block_table row addresses "
            f"(max_blocks * block_kv = {table_ref.shape[1]} * {kv_ref.shape[1]})")
    logits = _empty_logits(fn, q_ref.shape[0] * q_ref.shape[1], max_len, dtype_name, q_data)
    _C.fp8_fp4_paged_mqa_logits(q_ref, optional_ref(q_sf, fn, "q_sf"), kv_ref,
                                to_ref(weights, fn, "weights"), to_ref(context_lens, fn, "context_lens"),
                                table_ref, to_ref(schedule_meta, fn, "schedule_meta"),
                                to_ref(logits, fn, "logits", writable=True), max_len, clean, None)
    return logits


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits=False, indices=None):
    """DeepGEMM's legacy name: FP8 q without scale factors and float32 logits."""
    return fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, context_lens, block_table, schedule_meta,
                                    max_context_len, clean_logits, np.float32, indices)
