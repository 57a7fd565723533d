"""Per-token, per-block and per-channel casts and cast-back with TileKernels' names and arguments.

Formats: ``'e4m3'`` (FP8 e4m3fn codes) and ``'e2m1'`` (FP4, two codes per int8 byte, element 2i in the
low nibble). Scaling factors come in TileKernels' three layouts (tile_kernels/_sf_layout.py). Inputs
are torch CPU tensors or numpy arrays; outputs have the input's kind. Every check runs before a kernel
writes anything.
"""
import numpy as np

from .. import _arrays as A
from .. import _kernels_quant as K
from .. import _sf_layout as L

_PLAIN = ("bfloat16", "float32")
_QUANTIZED = ("float8_e4m3fn", "int8", "uint8")


def _check_fmt(fn, fmt, allowed=("e4m3", "e2m1")):
    if fmt == "e5m6" and "e5m6" not in allowed:
        raise A.invalid_argument(fn, "fmt", "'e5m6' is only for per_token_cast / per_token_cast_to_e5m6 (plain "
                                 "input, one factor per token), as in TileKernels")
    return A.require_choice(fn, "fmt", fmt, allowed)


def _check_flags(fn, round_sf, use_tma_aligned_col_major_sf, use_packed_ue8m0):
    for name, v in (("round_sf", round_sf), ("use_tma_aligned_col_major_sf", use_tma_aligned_col_major_sf),
                    ("use_packed_ue8m0", use_packed_ue8m0)):
        if not isinstance(v, bool):
            raise A.ArgumentTypeError(f"{fn}: argument '{name}' must be a bool, got {type(v).__name__}")
    if use_packed_ue8m0 and not round_sf:
        raise A.invalid_argument(fn, "use_packed_ue8m0", "needs round_sf=True (UE8M0 holds powers of two)")
    return L.layout_of(use_tma_aligned_col_major_sf, use_packed_ue8m0)


def _input(fn, x, x_block_size):
    """(data, input spec, factor storage or None, logical hidden) of a plain or (codes, sf) input."""
    if isinstance(x, tuple):
        if x_block_size is None:
            raise A.invalid_argument(fn, "x_block_size", "is required when x is a (data, sf) pair")
        bt, bc = A.require_pair(fn, "x_block_size", x_block_size)
        data, sf = x
        A.require_array(fn, "x[0]", data, _QUANTIZED, ndim=2)
        dtype = "int8" if A.dtype_name(data) in ("int8", "uint8") else "float8_e4m3fn"
        if A.dtype_name(data) == "uint8":
            data = A.view_as(data, "int8")
        hidden = data.shape[1] * (2 if dtype == "int8" else 1)
        layout, storage = L.sf_storage_of(fn, "x[1]", sf, L.ceil_div(data.shape[0], bt), L.ceil_div(hidden, bc))
        A.check_same_kind(fn, data=data, sf=sf)
        return data, K.InputSpec(dtype, (bt, bc), layout), storage, hidden
    if x_block_size is not None:
        raise A.invalid_argument(fn, "x_block_size", "must be None for an unquantized x")
    A.require_array(fn, "x", x, _PLAIN, ndim=2)
    return x, K.InputSpec(A.dtype_name(x)), None, x.shape[1]


def _new_codes(like, tokens, hidden, fmt):
    if fmt == "e4m3":
        return A.alloc(like, (tokens, hidden), "float8_e4m3fn")
    return A.alloc(like, (tokens, hidden // 2), "uint8")


def _u8(a):
    """The uint8 view the kernels write e4m3 codes through (other arrays unchanged)."""
    return A.view_as(a, "uint8") if a is not None and A.dtype_name(a) == "float8_e4m3fn" else a


def _codes_result(out, fmt):
    return out if fmt == "e4m3" else A.view_as(out, "int8")


def _per_token(fn, x, fmt, num_per_channels, x_block_size, col, round_sf, packed, mode, sf=None):
    fmt = _check_fmt(fn, fmt)
    layout = _check_flags(fn, round_sf, col, packed)
    data, spec, x_sf, hidden = _input(fn, x, x_block_size)
    npc = A.require_int(fn, "num_per_channels", num_per_channels, minimum=1)
    if npc not in (16, 32, 64, 128) and not (npc == hidden and hidden % 64 == 0):
        raise A.invalid_argument(fn, "num_per_channels", f"must be 16, 32, 64, 128 or hidden (a multiple of 64), "
                                 f"got {npc} with hidden {hidden}")
    if fmt == "e2m1" and hidden % 2:
        raise A.invalid_argument(fn, "x", f"hidden must be even for e2m1 packing, got {hidden}")
    if spec.sf_block is not None and npc != hidden and npc % spec.sf_block[1] and spec.sf_block[1] % npc:
        raise A.invalid_argument(fn, "x_block_size", f"channel block {spec.sf_block[1]} and num_per_channels {npc} "
                                 "must divide one another")
    tokens, k_blocks = data.shape[0], L.ceil_div(hidden, npc)
    if mode == "cast_only":
        layout, sf_storage = L.sf_storage_of(fn, "sf", sf, tokens, k_blocks)
        sf_view = sf
    else:
        sf_storage, sf_view = L.alloc_sf(data, tokens, k_blocks, layout)
    out = None if mode == "sf_only" else _new_codes(data, tokens, hidden, fmt)
    if tokens:
        kernel = K.per_token_cast(hidden, npc, spec.key(), fmt, round_sf, layout, mode)
        args = [data] + ([x_sf] if x_sf is not None else []) + ([out] if out is not None else []) + [sf_storage]
        kernel.call_all(args)
    if mode == "sf_only":
        return sf_view
    if mode == "cast_only":
        return _codes_result(out, fmt)
    return _codes_result(out, fmt), sf_view


def per_token_cast(x, fmt, num_per_channels, x_block_size=None, use_tma_aligned_col_major_sf=False,
                   round_sf=False, use_packed_ue8m0=False):
    """Casts x [tokens, hidden] (bf16 / fp32, or a (codes, sf) pair with ``x_block_size``) to FP8 / FP4
    with one factor per 1 x num_per_channels block; returns (codes, sf). fmt 'e5m6' is
    per_token_cast_to_e5m6 (plain input only)."""
    if fmt == "e5m6":
        from ._e5m6 import per_token_cast_to_e5m6

        if x_block_size is not None:
            raise A.invalid_argument("per_token_cast", "x_block_size", "must be None with fmt 'e5m6'")
        return per_token_cast_to_e5m6(x, num_per_channels, use_tma_aligned_col_major_sf, round_sf, use_packed_ue8m0)
    return _per_token("per_token_cast", x, fmt, num_per_channels, x_block_size, use_tma_aligned_col_major_sf,
                      round_sf, use_packed_ue8m0, "cast")


def per_token_cast_with_sf_only(x, fmt, num_per_channels, x_block_size=None, use_tma_aligned_col_major_sf=False,
                                round_sf=False, use_packed_ue8m0=False):
    """The factors per_token_cast would return, without writing codes."""
    return _per_token("per_token_cast_with_sf_only", x, fmt, num_per_channels, x_block_size,
                      use_tma_aligned_col_major_sf, round_sf, use_packed_ue8m0, "sf_only")


def per_token_cast_with_precomputed_sf(x, fmt, num_per_channels, sf, x_block_size=None,
                                       use_tma_aligned_col_major_sf=False, round_sf=False, use_packed_ue8m0=False):
    """Codes of x for given factors ``sf`` (any of the three layouts): code = x * (1 / sf)."""
    return _per_token("per_token_cast_with_precomputed_sf", x, fmt, num_per_channels, x_block_size,
                      use_tma_aligned_col_major_sf, round_sf, use_packed_ue8m0, "cast_only", sf)


def _per_block(fn, x, fmt, block_size, col, round_sf, packed, mode, sf=None):
    fmt = _check_fmt(fn, fmt)
    layout = _check_flags(fn, round_sf, col, packed)
    A.require_array(fn, "x", x, _PLAIN, ndim=2)
    if not A.is_contiguous(x):
        raise A.invalid_argument(fn, "x", "must be contiguous")
    bt, bc = A.require_pair(fn, "block_size", block_size)
    if bt not in (32, 128) or bc not in (32, 128):
        raise A.invalid_argument(fn, "block_size", f"must be (32 or 128, 32 or 128), got {block_size!r}")
    tokens, hidden = x.shape
    if hidden % 64:
        raise A.invalid_argument(fn, "x", f"hidden must be a multiple of 64, got {hidden}")
    m, k = L.ceil_div(tokens, bt), L.ceil_div(hidden, bc)
    if mode == "cast_only":
        layout, sf_storage = L.sf_storage_of(fn, "sf", sf, m, k)
        sf_view = sf
    else:
        sf_storage, sf_view = L.alloc_sf(x, m, k, layout)
    out = None if mode == "sf_only" else _new_codes(x, tokens, hidden, fmt)
    if tokens:
        kernel = K.per_block_cast(hidden, bt, bc, K.InputSpec(A.dtype_name(x)).key(), fmt, round_sf, layout, mode)
        kernel.call_all([x] + ([out] if out is not None else []) + [sf_storage])
    if mode == "sf_only":
        return sf_view
    if mode == "cast_only":
        return _codes_result(out, fmt)
    return _codes_result(out, fmt), sf_view


def per_block_cast(x, fmt, block_size, use_tma_aligned_col_major_sf=False, round_sf=False, use_packed_ue8m0=False):
    """Casts x [tokens, hidden] to FP8 / FP4 with one factor per block_size = (tokens, channels) block."""
    return _per_block("per_block_cast", x, fmt, block_size, use_tma_aligned_col_major_sf, round_sf,
                      use_packed_ue8m0, "cast")


def per_block_cast_with_sf_only(x, fmt, block_size, use_tma_aligned_col_major_sf=False, round_sf=False,
                                use_packed_ue8m0=False):
    return _per_block("per_block_cast_with_sf_only", x, fmt, block_size, use_tma_aligned_col_major_sf, round_sf,
                      use_packed_ue8m0, "sf_only")


def per_block_cast_with_precomputed_sf(x, fmt, block_size, sf, use_tma_aligned_col_major_sf=False, round_sf=False,
                                       use_packed_ue8m0=False):
    return _per_block("per_block_cast_with_precomputed_sf", x, fmt, block_size, use_tma_aligned_col_major_sf,
                      round_sf, use_packed_ue8m0, "cast_only", sf)


def cast_back(x, fmt, x_block_size, x_special_fmt=None):
    """Decodes a (codes, sf) pair to ``fmt`` 'bf16' or 'fp32': value = code * sf of its block."""
    fn = "cast_back"
    A.require_choice(fn, "fmt", fmt, ("bf16", "fp32"))
    if x_special_fmt is not None:
        if x_special_fmt == "e5m6":
            from ._e5m6 import cast_back_e5m6

            return cast_back_e5m6(x, fmt, x_block_size)
        raise A.invalid_argument(fn, "x_special_fmt", f"must be None or 'e5m6', got {x_special_fmt!r}")
    if not isinstance(x, tuple) or len(x) != 2:
        raise A.ArgumentTypeError(f"{fn}: argument 'x' must be a (data, sf) tuple, got {type(x).__name__}")
    data, spec, x_sf, hidden = _input(fn, x, x_block_size)
    if hidden % 64:
        raise A.invalid_argument(fn, "x", f"hidden must be a multiple of 64, got {hidden}")
    out_dtype = "bfloat16" if fmt == "bf16" else "float32"
    out = A.alloc(data, (data.shape[0], hidden), out_dtype)
    if data.shape[0]:
        K.cast_back(hidden, spec.key(), out_dtype).call_all([data, x_sf, out])
    return out


def per_token_cast_back(x, fmt, num_per_channels, x_special_fmt=None):
    return cast_back(x, fmt, (1, num_per_channels), x_special_fmt=x_special_fmt)


def _per_channel(fn, x, fmt, num_per_tokens, round_sf, transposed, num_per_channels=None, pos_to_token=None,
                 allowed_npt=(128,)):
    A.require_choice(fn, "fmt", fmt, ("e4m3",))
    if not isinstance(round_sf, bool):
        raise A.ArgumentTypeError(f"{fn}: argument 'round_sf' must be a bool, got {type(round_sf).__name__}")
    npt = A.require_int(fn, "num_per_tokens", num_per_tokens, allowed=allowed_npt)
    data, spec, x_sf, hidden = _input(fn, x, None if num_per_channels is None else (1, num_per_channels))
    if spec.sf_block is not None and (spec.sf_block[1] != 128 or spec.dtype != "float8_e4m3fn"):
        raise A.invalid_argument(fn, "x", "a (codes, sf) input must be e4m3 codes with num_per_channels=128")
    if not A.is_contiguous(data):
        raise A.invalid_argument(fn, "x", "must be contiguous")
    if hidden % 64:
        raise A.invalid_argument(fn, "x", f"hidden must be a multiple of 64, got {hidden}")
    tokens = data.shape[0]
    if pos_to_token is not None:
        A.require_array(fn, "pos_to_token", pos_to_token, ("int32",), ndim=1)
        A.check_same_kind(fn, x=data, pos_to_token=pos_to_token)
        tokens = pos_to_token.shape[0]
        if tokens % 16:
            raise A.invalid_argument(fn, "pos_to_token", f"length must be a multiple of 16, got {tokens}")
    elif tokens % npt:
        raise A.invalid_argument(fn, "x", f"the number of tokens must be a multiple of {npt}, got {tokens}")
    out = A.alloc(data, (hidden, tokens) if transposed else (tokens, hidden), "float8_e4m3fn")
    sf = A.alloc(data, (L.ceil_div(tokens, npt), hidden), "float32")
    if tokens:
        kernel = K.per_channel_cast(hidden, npt, spec.key(), round_sf, transposed, pos_to_token is not None)
        args = [data] + ([x_sf] if x_sf is not None else []) + [_u8(out), sf]
        kernel.call_all(args + ([pos_to_token] if pos_to_token is not None else []))
    return out, sf


def per_channel_cast(x, fmt, num_per_tokens, round_sf=False):
    """Casts x [tokens, hidden] to e4m3 with one factor per column segment of num_per_tokens (128) tokens;
    returns (codes [tokens, hidden], sf [tokens / 128, hidden])."""
    return _per_channel("per_channel_cast", x, fmt, num_per_tokens, round_sf, False)


def per_channel_cast_and_transpose(x, fmt, num_per_tokens, round_sf=False):
    """per_channel_cast with the codes transposed: (codes [hidden, tokens], sf [tokens / npt, hidden]);
    num_per_tokens 32 or 128, x bfloat16."""
    A.require_array("per_channel_cast_and_transpose", "x", x, ("bfloat16",), ndim=2)
    return _per_channel("per_channel_cast_and_transpose", x, fmt, num_per_tokens, round_sf, True,
                        allowed_npt=(32, 128))


def per_channel_cast_fused(x, fmt, num_per_tokens, round_sf=False, num_per_channels=None, pos_to_token=None):
    """per_channel_cast of a plain or (e4m3 codes, per-token sf with num_per_channels=128) input, output row
    r reading input row pos_to_token[r] (-1: a row of zeros) when pos_to_token is given."""
    return _per_channel("per_channel_cast_fused", x, fmt, num_per_tokens, round_sf, False, num_per_channels,
                        pos_to_token)


def unpack_from_e2m1fn_x2(x, out_dtype=None):
    """Decodes packed FP4 bytes [..., n] (int8 / uint8, element 2i in the low nibble) into [..., 2n] values
    of out_dtype (float32 by default; bfloat16 also accepted)."""
    fn = "unpack_from_e2m1fn_x2"
    A.require_array(fn, "x", x, ("int8", "uint8"))
    if x.ndim == 0:
        raise A.invalid_argument(fn, "x", "must have at least 1 dimension")
    name = "float32" if out_dtype is None else A.dtype_spelling(out_dtype)
    A.require_choice(fn, "out_dtype", name, ("float32", "bfloat16"))
    shape = tuple(x.shape)
    flat = x.reshape(-1, shape[-1]) if x.ndim != 2 else x
    if A.dtype_name(flat) == "uint8":
        flat = A.view_as(flat, "int8")
    out = A.alloc(x, (flat.shape[0], 2 * shape[-1]), name)
    if flat.shape[0] and shape[-1]:
        K.unpack_e2m1(shape[-1], name).call_all([flat, out])
    return out.reshape(*shape[:-1], 2 * shape[-1])


def swiglu_forward_and_per_token_cast(x, fmt, num_per_channels, pos_to_token_topk=None, topk_weights=None,
                                      pos_to_expert=None, use_tma_aligned_col_major_sf=False, round_sf=False,
                                      use_packed_ue8m0=False, swiglu_clamp_value=None, clamped_count=None,
                                      sf_clamp_min=None):
    """e4m3 per-token cast of SwiGLU(x) = silu(x[:, :h]) * x[:, h:] (clamped first with swiglu_clamp_value:
    left <= c, |right| <= c; counts added to clamped_count int64 [3]), times the row's routing weight
    topk_weights.flat[pos_to_token_topk[row]] (0 for negative positions); rows whose pos_to_expert is
    negative are zeros. Returns (codes [rows, h], sf)."""
    fn = "swiglu_forward_and_per_token_cast"
    A.require_choice(fn, "fmt", fmt, ("e4m3",))
    layout = _check_flags(fn, round_sf, use_tma_aligned_col_major_sf, use_packed_ue8m0)
    A.require_array(fn, "x", x, _PLAIN, ndim=2)
    if not A.is_contiguous(x):
        raise A.invalid_argument(fn, "x", "must be contiguous")
    rows, hidden2 = x.shape
    hidden = hidden2 // 2
    if hidden2 % 2 or hidden % 128:
        raise A.invalid_argument(fn, "x", f"must have 2 * hidden columns with hidden a multiple of 128, got {hidden2}")
    npc = A.require_int(fn, "num_per_channels", num_per_channels, minimum=1)
    if npc not in (128, hidden):
        raise A.invalid_argument(fn, "num_per_channels", f"must be 128 or hidden ({hidden}), got {npc}")
    weighted = pos_to_token_topk is not None
    if weighted:
        A.require_array(fn, "pos_to_token_topk", pos_to_token_topk, ("int32",), ndim=1)
        if topk_weights is None:
            raise A.invalid_argument(fn, "topk_weights", "is required with pos_to_token_topk")
        A.require_array(fn, "topk_weights", topk_weights, ("float32",), ndim=2)
        if not A.is_contiguous(topk_weights):
            raise A.invalid_argument(fn, "topk_weights", "must be contiguous")
        if pos_to_token_topk.shape[0] != rows:
            raise A.invalid_argument(fn, "pos_to_token_topk", f"must have {rows} entries, got "
                                     f"{pos_to_token_topk.shape[0]}")
    if pos_to_expert is not None:
        A.require_array(fn, "pos_to_expert", pos_to_expert, ("int32",), ndim=1)
        if pos_to_expert.shape[0] != rows:
            raise A.invalid_argument(fn, "pos_to_expert", f"must have {rows} entries, got {pos_to_expert.shape[0]}")
    if clamped_count is not None:
        if swiglu_clamp_value is None:
            raise A.invalid_argument(fn, "clamped_count", "needs swiglu_clamp_value")
        A.require_array(fn, "clamped_count", clamped_count, ("int64",), ndim=1)
        if clamped_count.shape[0] != 3:
            raise A.invalid_argument(fn, "clamped_count", f"must have 3 entries, got {clamped_count.shape[0]}")
    A.check_same_kind(fn, x=x, pos_to_token_topk=pos_to_token_topk, topk_weights=topk_weights,
                      pos_to_expert=pos_to_expert, clamped_count=clamped_count)
    sf_storage, sf_view = L.alloc_sf(x, rows, L.ceil_div(hidden, npc), layout)
    out = A.alloc(x, (rows, hidden), "float8_e4m3fn")
    if rows:
        none_i32 = A.alloc(x, (rows,), "int32", zero=True)
        kernel = K.swiglu_per_token_cast(hidden, npc, A.dtype_name(x), round_sf, layout, weighted,
                                         pos_to_expert is not None, swiglu_clamp_value is not None,
                                         clamped_count is not None,
                                         None if sf_clamp_min is None else float(sf_clamp_min))
        kernel.call_all([x, _u8(out), sf_storage, pos_to_token_topk if weighted else none_i32,
                         topk_weights.reshape(-1) if weighted else A.alloc(x, (1,), "float32", zero=True),
                         pos_to_expert if pos_to_expert is not None else none_i32,
                         clamped_count if clamped_count is not None else A.alloc(x, (3,), "int64", zero=True),
                         float(swiglu_clamp_value or 0.0)])
    return out, sf_view


def per_block_cast_lossless(x, fmt, x_block_size, out_block_size, use_tma_aligned_col_major_sf=False,
                            round_sf=False, use_packed_ue8m0=False):
    """Re-encodes an e2m1 (codes, sf) pair as e4m3 with out_block_size factors: codes decoded as code * sf,
    then cast with power-of-two factors (whatever round_sf says). Lossless (cast_back gives the same values)
    for power-of-two input factors (an e2m1 cast with round_sf) that span at most 2^14 within an output
    block: the smallest code then stays on e4m3's grid."""
    fn = "per_block_cast_lossless"
    A.require_choice(fn, "fmt", fmt, ("e4m3",))
    layout = _check_flags(fn, round_sf, use_tma_aligned_col_major_sf, use_packed_ue8m0)
    if not isinstance(x, tuple) or len(x) != 2:
        raise A.ArgumentTypeError(f"{fn}: argument 'x' must be a (data, sf) tuple, got {type(x).__name__}")
    data, spec, x_sf, hidden = _input(fn, x, x_block_size)
    if not spec.packed_fp4:
        raise A.invalid_argument(fn, "x", "must hold packed e2m1 codes (int8), the only lossless source format")
    bt, bc = A.require_pair(fn, "out_block_size", out_block_size)
    if bt not in (1, 32, 128) or bc not in (32, 128) or bt % spec.sf_block[0] or bc % spec.sf_block[1]:
        raise A.invalid_argument(fn, "out_block_size", f"must be (1, 32 or 128, 32 or 128) multiples of "
                                 f"x_block_size {spec.sf_block}, got {out_block_size!r}")
    if hidden % 32:
        raise A.invalid_argument(fn, "x", f"hidden must be a multiple of 32, got {hidden}")
    tokens = data.shape[0]
    sf_storage, sf_view = L.alloc_sf(data, L.ceil_div(tokens, bt), L.ceil_div(hidden, bc), layout)
    out = A.alloc(data, (tokens, hidden), "float8_e4m3fn")
    if tokens:
        # power-of-two factors keep every decoded value exact (see the docstring); the floor is the
        # smallest normal factor instead of 1e-4, so tiny input factors stay exact too
        floor = 448.0 * 2.0 ** -126
        if bt == 1:
            kernel = K.per_token_cast(hidden, bc, spec.key(), "e4m3", True, layout, "cast", floor)
        else:
            kernel = K.per_block_cast(hidden, bt, bc, spec.key(), "e4m3", True, layout, "cast", floor)
        kernel.call_all([data, x_sf, out, sf_storage])
    return out, sf_view


def swiglu_backward_and_per_token_cast(x, grad_out, weight, pos_to_token_topk, token_topk_to_pos, num_per_channels,
                                       round_sf=False, swiglu_clamp_value=None):
    """SwiGLU backward from the e4m3 forward input x = (codes [rows, 2h], sf [rows, 2h / npc]) and grad_out
    (bf16 [rows, h]): returns (out bf16 [rows, h], (grad e4m3 [rows, 2h], sf), grad bf16 [rows, 2h],
    weight_grad float32 [tokens, topk]); see _kernels_quant.swiglu_backward_per_token_cast."""
    fn = "swiglu_backward_and_per_token_cast"
    npc = A.require_int(fn, "num_per_channels", num_per_channels, allowed=(32, 128))
    if not isinstance(round_sf, bool):
        raise A.ArgumentTypeError(f"{fn}: argument 'round_sf' must be a bool, got {type(round_sf).__name__}")
    if not isinstance(x, tuple) or len(x) != 2:
        raise A.ArgumentTypeError(f"{fn}: argument 'x' must be a (data, sf) tuple, got {type(x).__name__}")
    data, sf = x
    A.require_array(fn, "x[0]", data, ("float8_e4m3fn",))
    if data.ndim not in (2, 3) or data.shape[-1] % (2 * npc) or not A.is_contiguous(data):
        raise A.invalid_argument(fn, "x[0]", f"must be a contiguous [rows, 2 * hidden] array with hidden a multiple of "
                                 f"{npc}, got shape {list(data.shape)}")
    hidden = data.shape[-1] // 2
    data = data.reshape(-1, 2 * hidden)
    rows = data.shape[0]
    A.require_array(fn, "x[1]", sf, ("float32",), ndim=2)
    if tuple(sf.shape) != (rows, 2 * hidden // npc) or not A.is_contiguous(sf):
        raise A.invalid_argument(fn, "x[1]", f"must be contiguous with shape [{rows}, {2 * hidden // npc}], got "
                                 f"{list(sf.shape)}")
    A.require_array(fn, "grad_out", grad_out, ("bfloat16",))
    if int(np.prod(grad_out.shape)) != rows * hidden or grad_out.shape[-1] != hidden or not A.is_contiguous(grad_out):
        raise A.invalid_argument(fn, "grad_out", f"must be contiguous with {rows} rows of {hidden}, got "
                                 f"{list(grad_out.shape)}")
    grad_out = grad_out.reshape(rows, hidden)
    A.require_array(fn, "weight", weight, ("float32",), ndim=2)
    A.require_array(fn, "token_topk_to_pos", token_topk_to_pos, ("int32",), ndim=2)
    A.require_array(fn, "pos_to_token_topk", pos_to_token_topk, ("int32",), ndim=1)
    if tuple(token_topk_to_pos.shape) != tuple(weight.shape) or not A.is_contiguous(weight) \
            or not A.is_contiguous(token_topk_to_pos):
        raise A.invalid_argument(fn, "token_topk_to_pos", "must be contiguous with weight's shape")
    if pos_to_token_topk.shape[0] != rows:
        raise A.invalid_argument(fn, "pos_to_token_topk", f"must have {rows} entries, got {pos_to_token_topk.shape[0]}")
    A.check_same_kind(fn, x=data, grad_out=grad_out, weight=weight, pos_to_token_topk=pos_to_token_topk,
                      token_topk_to_pos=token_topk_to_pos)
    out = A.alloc(data, (rows, hidden), "bfloat16")
    grad_fp8 = A.alloc(data, (rows, 2 * hidden), "float8_e4m3fn")
    grad_sf = A.alloc(data, (rows, 2 * hidden // npc), "float32")
    grad = A.alloc(data, (rows, 2 * hidden), "bfloat16")
    weight_grad = A.alloc(data, weight.shape, "float32", zero=True)
    if rows or weight.shape[0]:
        K.swiglu_backward_per_token_cast(hidden, npc, round_sf, swiglu_clamp_value is not None).call_all(
            [data, sf, grad_out, weight.reshape(-1), pos_to_token_topk, token_topk_to_pos.reshape(-1), out, _u8(grad_fp8),
             grad_sf, grad, weight_grad.reshape(-1), float(swiglu_clamp_value or 0.0)])
    return out, (grad_fp8, grad_sf), grad, weight_grad


def swiglu_forward_and_per_channel_cast_and_transpose(x, fmt, num_per_tokens, round_sf=False, without_transpose=False,
                                                      swiglu_clamp_value=None):
    """e4m3 per-channel cast (one factor per num_per_tokens tokens of a channel) of SwiGLU(x) =
    silu(x[:, :h]) * x[:, h:] for bf16 x [tokens, 2h] (clamped first with swiglu_clamp_value); returns
    (codes [h, tokens], or [tokens, h] with without_transpose, sf [tokens / npt, h])."""
    fn = "swiglu_forward_and_per_channel_cast_and_transpose"
    A.require_choice(fn, "fmt", fmt, ("e4m3",))
    if not isinstance(round_sf, bool) or not isinstance(without_transpose, bool):
        raise A.ArgumentTypeError(f"{fn}: arguments 'round_sf' and 'without_transpose' must be bools")
    npt = A.require_int(fn, "num_per_tokens", num_per_tokens, allowed=(32, 128))
    A.require_array(fn, "x", x, ("bfloat16",), ndim=2)
    if not A.is_contiguous(x):
        raise A.invalid_argument(fn, "x", "must be contiguous")
    tokens, hidden2 = x.shape
    if tokens % npt or hidden2 % 128:
        raise A.invalid_argument(fn, "x", f"needs tokens a multiple of {npt} and 2 * hidden a multiple of 128, got "
                                 f"shape {list(x.shape)}")
    hidden = hidden2 // 2
    out = A.alloc(x, (tokens, hidden) if without_transpose else (hidden, tokens), "float8_e4m3fn")
    sf = A.alloc(x, (tokens // npt, hidden), "float32")
    if tokens:
        clamp = None if swiglu_clamp_value is None else float(swiglu_clamp_value)
        kernel = K.per_channel_cast(hidden, npt, K.InputSpec("bfloat16").key(), round_sf, not without_transpose, False,
                                    True, clamp)
        kernel.call_all([x, _u8(out), sf])
    return out, sf
