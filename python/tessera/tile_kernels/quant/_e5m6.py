"""TileKernels' e5m6 casts: 12-bit codes (the top 12 bits of a binary16, rounded by TileKernels' rule;
_tl_numerics.e5m6_code), eight values packed in three little-endian 32-bit words, returned as uint8
[tokens, hidden * 3 / 2]; one factor per token (max code 65024, floor 1e-4) in any of the three
factor layouts."""
from .. import _arrays as A
from .. import _kernels_quant as K
from .. import _sf_layout as L


def per_token_cast_to_e5m6(x, num_per_channels, use_tma_aligned_col_major_sf=False, round_sf=False,
                           use_packed_ue8m0=False):
    """x bf16 / float32 [tokens, hidden] (hidden a multiple of 8) with num_per_channels == hidden ->
    (uint8 [tokens, hidden * 3 / 2] packed codes, the per-token factors)."""
    from ._casts import _check_flags

    fn = "per_token_cast_to_e5m6"
    layout = _check_flags(fn, round_sf, use_tma_aligned_col_major_sf, use_packed_ue8m0)
    A.require_array(fn, "x", x, ("bfloat16", "float32"), ndim=2)
    tokens, hidden = (int(d) for d in x.shape)
    npc = A.require_int(fn, "num_per_channels", num_per_channels, minimum=1)
    if npc != hidden:
        raise A.invalid_argument(fn, "num_per_channels", f"must equal hidden ({hidden}): one factor per token, "
                                 f"got {npc}")
    if hidden % 8:
        raise A.invalid_argument(fn, "x", f"hidden must be a multiple of 8 (eight codes per three words), got {hidden}")
    words = A.alloc(x, (tokens, hidden // 8 * 3), "int32")
    sf_storage, sf_view = L.alloc_sf(x, tokens, 1, layout)
    if tokens:
        K.per_token_cast_e5m6(hidden, A.dtype_name(x), round_sf, layout).call_all([x, words, sf_storage])
    return A.view_as(words, "uint8"), sf_view


def cast_back_e5m6(x, fmt, x_block_size):
    """(packed uint8 [tokens, hidden * 3 / 2], factors of x_block_size blocks) -> bf16 / float32
    [tokens, hidden]: each code's value times its block's factor."""
    fn = "cast_back_e5m6"
    A.require_choice(fn, "fmt", fmt, ("bf16", "fp32"))
    if not isinstance(x, tuple) or len(x) != 2:
        raise A.ArgumentTypeError(f"{fn}: argument 'x' must be a (data, sf) tuple, got {type(x).__name__}")
    data, sf = x
    A.require_array(fn, "x[0]", data, ("uint8",), ndim=2)
    bt, bc = A.require_pair(fn, "x_block_size", x_block_size)
    tokens, packed = (int(d) for d in data.shape)
    if packed % 12:
        raise A.invalid_argument(fn, "x[0]", f"must hold whole groups of 12 bytes (8 codes) per row, got {packed} "
                                 "bytes")
    hidden = packed * 2 // 3
    layout, storage = L.sf_storage_of(fn, "x[1]", sf, L.ceil_div(tokens, bt), L.ceil_div(hidden, bc))
    A.check_same_kind(fn, data=data, sf=sf)
    words = A.as_words(data)
    if words is None:  # rows not whole aligned words: a contiguous copy is
        words = A.as_words(data.contiguous() if hasattr(data, "contiguous") else data.copy(order="C"))
    out_dtype = "bfloat16" if fmt == "bf16" else "float32"
    out = A.alloc(data, (tokens, hidden), out_dtype)
    if tokens:
        K.cast_back_e5m6(hidden, bt, bc, layout, out_dtype).call_all([words, storage, out])
    return out
