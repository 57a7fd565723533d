"""Tile-language kernels of tessera.tile_kernels.quant (the public functions live in quant/).

FP8 outputs of the per-token and per-block casts are float8_e4m3 parameters (the store encodes in lane
arithmetic: _tl_numerics.e4m3_stored); the other kernels' are uint8 parameters holding codes computed
by _tl_numerics.e4m3, and Python hands those kernels uint8 views of float8 arrays.

Each factory is memoized on its (hashable) configuration and returns a compiled JITKernel whose
parameters are all given by the caller (no out_idx): the Python layer allocates outputs, so SF
storages can be strided views. Row counts are T.dynamic: one kernel serves every number of tokens.

Data flow of a cast block: the tile is loaded into a float32 fragment (decoding FP8 / FP4 inputs and
applying their factors), its absolute maxima are row reductions (T.reduce_absmax), the factors come from
_tl_numerics.sf_and_inv, and the scaled tile is encoded in one T.Parallel nest.
"""

from .. import language as T
from ..tl import compile as tl_compile
from . import _sf_layout as L
from . import _tl_numerics as N
from ._kernel_cache import kernel_cache

TL_DTYPE = {"bfloat16": "bfloat16", "float32": "float32", "float8_e4m3fn": "float8_e4m3", "int8": "int8",
            "uint8": "uint8"}
_TILE_ELEMS = 4096  # elements of one float32 fragment of a block cast: 16 KiB
# Elements of one per-token tile: a few rows, so a grid block reads few row streams at once (32 rows
# of 128 took 1.3-1.5x the time of 4 rows from DRAM; docs/notes/2026-12-07-zen4-levels-side-by-side.md).
_TOKEN_TILE_ELEMS = 512


def _compile(prim):
    return tl_compile(prim)


class InputSpec:
    """How a cast reads its input: a plain float tensor, or quantized codes with their factors."""

    def __init__(self, dtype: str, sf_block=None, sf_layout=None):
        self.dtype = dtype                  # bfloat16 / float32 / float8_e4m3fn / int8 (packed e2m1)
        self.sf_block = sf_block            # (bt, bc) of the input factors, None for plain input
        self.sf_layout = sf_layout

    def key(self):
        return (self.dtype, self.sf_block, self.sf_layout)

    @property
    def packed_fp4(self):
        return self.dtype == "int8"

    def physical_cols(self, hidden):
        return hidden // 2 if self.packed_fp4 else hidden


def _input_params(spec: InputSpec, hidden: int, tokens):
    """(x parameter annotation, x_sf annotation or None)."""
    x_ann = T.Tensor((tokens, spec.physical_cols(hidden)), TL_DTYPE[spec.dtype])
    if spec.sf_block is None:
        return x_ann, None
    bt, bc = spec.sf_block
    rows = T.dynamic("x_sf_rows")
    cols = T.dynamic("x_sf_cols")
    shape = L.sf_param_shape(spec.sf_layout, rows, L.ceil_div(hidden, bc), cols)
    return x_ann, T.Tensor(shape, L.storage_dtype(spec.sf_layout))


def _code_value(spec: InputSpec, x, r, c):
    """Element (r, c) of a quantized input as float32, before its factor."""
    if spec.packed_fp4:
        byte = T.cast(x[r, c // 2], "int32") & 255
        return N.e2m1_value((byte >> ((c % 2) * 4)) & 15)
    return T.cast(x[r, c], "float32")


def _decoded(spec: InputSpec, x, x_sf, r, c):
    """Element (r, c) of the input as float32, its factor applied (the reference's order: code * sf)."""
    if spec.packed_fp4:
        byte = T.cast(x[r, c // 2], "int32") & 255
        v = N.e2m1_value((byte >> ((c % 2) * 4)) & 15)
    else:
        v = T.cast(x[r, c], "float32")
    if spec.sf_block is None:
        return v
    bt, bc = spec.sf_block
    return v * L.load_sf(x_sf, spec.sf_layout, r // bt, c // bc)


@T.macro
def _store_codes(fmt, out, frag, inv, rows, cols, r0, c0, in_row):
    """Encodes frag[i, j] * inv(i, j) into out[r0 + i, c0 + j] (float8 e4m3; FP4: two uint8 codes a byte)."""
    if fmt == "e4m3":
        for i, j in T.Parallel(rows, cols):
            out[r0 + i, c0 + j] = N.e4m3_stored(frag[i, j] * inv(i, j))
    else:
        for i, j in T.Parallel(rows, cols // 2):
            lo = frag[i, 2 * j] * inv(i, 2 * j)
            hi = frag[i, 2 * j + 1] * inv(i, 2 * j + 1)
            out[r0 + i, c0 // 2 + j] = T.cast(N.e2m1_code(lo) + N.e2m1_code(hi) * 16, "uint8")


@kernel_cache
def per_token_cast(hidden: int, npc: int, spec_key, fmt: str, round_sf: bool, sf_layout: str, mode: str,
                   clamp_min=None):
    """Cast with one factor per 1 x npc block. mode: 'cast' (codes + factors), 'sf_only', 'cast_only'
    (factors given). Parameters: x, [x_sf], [out], sf."""
    spec = InputSpec(*spec_key)
    tokens = T.dynamic("num_tokens")
    k_blocks = L.ceil_div(hidden, npc)
    rows = max(1, min(64, _TOKEN_TILE_ELEMS // npc))
    x_ann, x_sf_ann = _input_params(spec, hidden, tokens)
    out_ann = T.Tensor((tokens, hidden if fmt == "e4m3" else hidden // 2),
                       "float8_e4m3" if fmt == "e4m3" else "uint8")
    sf_ann = T.Tensor(L.sf_param_shape(sf_layout, tokens, k_blocks, T.dynamic("sf_cols")),
                      L.storage_dtype(sf_layout))

    @T.macro
    def body(x, x_sf, out, sf):
        with T.Kernel(k_blocks, T.ceildiv(tokens, rows), threads=128) as (bk, bm):
            frag = T.alloc_fragment((rows, npc), "float32")
            inv = T.alloc_fragment((rows,), "float32")
            r0 = bm * rows
            c0 = bk * npc
            if spec.sf_block is None and not spec.packed_fp4 and spec.dtype != "float8_e4m3fn":
                T.copy(x[r0, c0], frag)
            else:
                # the input factors of the tile, read once (a per-element read would be a 64-bit gather)
                in_bt, in_bc = spec.sf_block
                per_row = L.ceil_div(npc, in_bc)  # the caller keeps tiles from straddling input blocks
                in_sf = T.alloc_fragment((rows, per_row), "float32")
                for i in T.serial(rows):
                    for g in T.serial(per_row):
                        in_sf[i, g] = T.if_then_else(r0 + i < tokens, L.load_sf(
                            x_sf, spec.sf_layout, (r0 + i) // in_bt, (c0 + g * in_bc) // in_bc), 0.0)
                for i, j in T.Parallel(rows, npc):
                    frag[i, j] = T.if_then_else(c0 + j < hidden, _code_value(spec, x, r0 + i, c0 + j)
                                                * in_sf[i, j // in_bc if per_row > 1 else 0], 0.0)
            if mode == "cast_only":
                for i in T.serial(rows):
                    inv[i] = T.if_then_else(r0 + i < tokens, 1.0 / L.load_sf(sf, sf_layout, r0 + i, bk), 0.0)
            else:
                amax = T.alloc_fragment((rows,), "float32")
                T.reduce_absmax(frag, amax, dim=1)
                for i in T.serial(rows):
                    if r0 + i < tokens:
                        s, s_inv, byte = N.sf_and_inv(amax[i], fmt, round_sf, clamp_min)
                        L.store_sf(sf, sf_layout, r0 + i, bk, s, byte)
                        inv[i] = s_inv
            if mode != "sf_only":
                _store_codes(fmt, out, frag, lambda i, j: inv[i], rows, npc, r0, c0, None)

    return _compile(_make_prim(body, x_ann, x_sf_ann, None if mode == "sf_only" else out_ann, sf_ann))


def _make_prim(body, x_ann, x_sf_ann, out_ann, sf_ann):
    """A prim_func over the parameters that exist (x_sf and out are optional)."""
    if x_sf_ann is None and out_ann is None:
        @T.prim_func
        def main(x: x_ann, sf: sf_ann):
            body(x, None, None, sf)
    elif x_sf_ann is None:
        @T.prim_func
        def main(x: x_ann, out: out_ann, sf: sf_ann):
            body(x, None, out, sf)
    elif out_ann is None:
        @T.prim_func
        def main(x: x_ann, x_sf: x_sf_ann, sf: sf_ann):
            body(x, x_sf, None, sf)
    else:
        @T.prim_func
        def main(x: x_ann, x_sf: x_sf_ann, out: out_ann, sf: sf_ann):
            body(x, x_sf, out, sf)
    return main


_CHUNK_ROWS = 4  # rows per chunk of a block cast: few row streams at once, as _TOKEN_TILE_ELEMS


@T.macro
def _chunked_block_cast(x, out, sf, bt, bc, k_blocks, tokens, fmt, round_sf, sf_layout, clamp_min):
    """A plain-input block cast whose float32 block would not fit L1 (128 x 128 is 64 KiB): the block is
    read in _CHUNK_ROWS-row chunks twice, once for its maximum and once to encode, through a small
    fragment (the second read finds the bf16 block in L1 / L2)."""
    with T.Kernel(k_blocks, T.ceildiv(tokens, bt), threads=256) as (bk, bm):
        frag = T.alloc_fragment((_CHUNK_ROWS, bc), "float32")
        row_max = T.alloc_fragment((_CHUNK_ROWS,), "float32")
        amax = T.alloc_var("float32", init=0.0)
        for c in T.serial(bt // _CHUNK_ROWS):
            T.copy(x[bm * bt + c * _CHUNK_ROWS, bk * bc], frag)
            T.reduce_absmax(frag, row_max, dim=1)
            for i in T.serial(_CHUNK_ROWS):
                amax = T.max(amax, row_max[i])
        s, s_inv, byte = N.sf_and_inv(amax, fmt, round_sf, clamp_min)
        L.store_sf(sf, sf_layout, bm, bk, s, byte)
        for c in T.serial(bt // _CHUNK_ROWS):
            T.copy(x[bm * bt + c * _CHUNK_ROWS, bk * bc], frag)
            _store_codes(fmt, out, frag, lambda i, j: s_inv, _CHUNK_ROWS, bc, bm * bt + c * _CHUNK_ROWS, bk * bc, None)


@kernel_cache
def per_block_cast(hidden: int, bt: int, bc: int, spec_key, fmt: str, round_sf: bool, sf_layout: str, mode: str,
                   clamp_min=None):
    """Cast with one factor per bt x bc block; one grid block per factor. Parameters: x, [x_sf], [out], sf."""
    spec = InputSpec(*spec_key)
    tokens = T.dynamic("num_tokens")
    k_blocks = L.ceil_div(hidden, bc)
    x_ann, x_sf_ann = _input_params(spec, hidden, tokens)
    out_ann = T.Tensor((tokens, hidden if fmt == "e4m3" else hidden // 2),
                       "float8_e4m3" if fmt == "e4m3" else "uint8")
    sf_ann = T.Tensor(L.sf_param_shape(sf_layout, T.dynamic("sf_rows"), k_blocks, T.dynamic("sf_cols")),
                      L.storage_dtype(sf_layout))

    @T.macro
    def body(x, x_sf, out, sf):
        plain = spec.sf_block is None and not spec.packed_fp4 and spec.dtype != "float8_e4m3fn"
        if plain and bt * bc > _TILE_ELEMS and bt % _CHUNK_ROWS == 0 and mode == "cast":
            _chunked_block_cast(x, out, sf, bt, bc, k_blocks, tokens, fmt, round_sf, sf_layout, clamp_min)
            return
        with T.Kernel(k_blocks, T.ceildiv(tokens, bt), threads=256) as (bk, bm):
            frag = T.alloc_fragment((bt, bc), "float32")
            row_max = T.alloc_fragment((bt,), "float32")
            inv = T.alloc_var("float32")
            if plain:
                T.copy(x[bm * bt, bk * bc], frag)
            else:
                for i, j in T.Parallel(bt, bc):
                    frag[i, j] = T.if_then_else(bk * bc + j < hidden,
                                                _decoded(spec, x, x_sf, bm * bt + i, bk * bc + j), 0.0)
            if mode == "cast_only":
                inv = 1.0 / L.load_sf(sf, sf_layout, bm, bk)
            else:
                T.reduce_absmax(frag, row_max, dim=1)
                amax = T.alloc_var("float32", init=0.0)
                for i in T.serial(bt):
                    amax = T.max(amax, row_max[i])
                s, s_inv, byte = N.sf_and_inv(amax, fmt, round_sf, clamp_min)
                L.store_sf(sf, sf_layout, bm, bk, s, byte)
                inv = s_inv
            if mode != "sf_only":
                _store_codes(fmt, out, frag, lambda i, j: inv, bt, bc, bm * bt, bk * bc, None)

    return _compile(_make_prim(body, x_ann, x_sf_ann, None if mode == "sf_only" else out_ann, sf_ann))


@kernel_cache
def cast_back(hidden: int, spec_key, out_dtype: str):
    """Decodes FP8 / FP4 codes times their factors into bfloat16 / float32 (x, x_sf, out). A block is
    bt rows (at least 4: few row streams at once, as _TOKEN_TILE_ELEMS) by one factor block of columns:
    the factors are read once per row."""
    spec = InputSpec(*spec_key)
    bt, bc = spec.sf_block
    tokens = T.dynamic("num_tokens")
    x_ann, x_sf_ann = _input_params(spec, hidden, tokens)
    out_ann = T.Tensor((tokens, hidden), TL_DTYPE[out_dtype])
    rows = max(4, bt)

    @T.prim_func
    def main(x: x_ann, x_sf: x_sf_ann, out: out_ann):
        with T.Kernel(T.ceildiv(hidden, bc), T.ceildiv(tokens, rows), threads=128) as (bk, bm):
            scale = T.alloc_fragment((rows,), "float32")
            for i in T.serial(rows):
                scale[i] = T.if_then_else(bm * rows + i < tokens,
                                          L.load_sf(x_sf, spec.sf_layout, (bm * rows + i) // bt, bk), 0.0)
            if spec.packed_fp4:
                for i, j in T.Parallel(rows, bc):
                    byte = T.cast(x[bm * rows + i, (bk * bc + j) // 2], "int32") & 255
                    value = N.e2m1_value((byte >> ((j % 2) * 4)) & 15)
                    out[bm * rows + i, bk * bc + j] = value * scale[i]
            else:
                for i, j in T.Parallel(rows, bc):
                    out[bm * rows + i, bk * bc + j] = T.cast(x[bm * rows + i, bk * bc + j], "float32") * scale[i]

    return _compile(main)


@kernel_cache
def per_channel_cast(hidden: int, bt: int, in_spec_key, round_sf: bool, transposed: bool, gather: bool,
                     swiglu: bool = False, clamp_value=None):
    """e4m3 cast with one factor per bt x 1 block (a column segment of bt tokens); optionally reading
    row pos_to_token[r] for output row r (-1: a zero row), writing the transposed codes, or casting
    SwiGLU(x) of an x with 2 * hidden columns (clamped first when clamp_value is not None)."""
    spec = InputSpec(*in_spec_key)
    tokens_in = T.dynamic("num_tokens")
    tokens = T.dynamic("num_tokens_out") if gather else tokens_in
    cols = 128
    x_ann, x_sf_ann = _input_params(spec, 2 * hidden if swiglu else hidden, tokens_in)
    out_ann = T.Tensor((hidden, tokens) if transposed else (tokens, hidden), "uint8")
    sf_ann = T.Tensor((T.dynamic("sf_rows"), hidden), "float32")
    pos_ann = T.Tensor((tokens,), "int32")

    @T.macro
    def body(x, x_sf, out, sf, pos):
        with T.Kernel(T.ceildiv(hidden, cols), T.ceildiv(tokens, bt), threads=256) as (bk, bm):
            frag = T.alloc_fragment((bt, cols), "float32")
            col_max = T.alloc_fragment((cols,), "float32")
            inv = T.alloc_fragment((cols,), "float32")
            r0 = bm * bt
            c0 = bk * cols
            if gather:
                src = T.alloc_fragment((bt,), "int32")
                for i in T.serial(bt):
                    src[i] = T.if_then_else(r0 + i < tokens, pos[r0 + i], -1)
                for i, j in T.Parallel(bt, cols):
                    frag[i, j] = T.if_then_else(src[i] >= 0, _decoded(spec, x, x_sf, src[i], c0 + j), 0.0)
            elif swiglu:
                for i, j in T.Parallel(bt, cols):
                    frag[i, j] = _swiglu(T.cast(x[r0 + i, c0 + j], "float32"),
                                         T.cast(x[r0 + i, hidden + c0 + j], "float32"), clamp_value is not None,
                                         T.cast(clamp_value or 0.0, "float32"))
            elif spec.sf_block is None:
                T.copy(x[r0, c0], frag)
            else:
                for i, j in T.Parallel(bt, cols):
                    frag[i, j] = _decoded(spec, x, x_sf, r0 + i, c0 + j)
            T.reduce_absmax(frag, col_max, dim=0)
            for j in T.serial(cols):
                s, s_inv, _ = N.sf_and_inv(col_max[j], "e4m3", round_sf)
                sf[bm, c0 + j] = s
                inv[j] = s_inv
            if transposed:
                for j, i in T.Parallel(cols, bt):
                    out[c0 + j, r0 + i] = N.e4m3(frag[i, j] * inv[j])
            else:
                for i, j in T.Parallel(bt, cols):
                    out[r0 + i, c0 + j] = N.e4m3(frag[i, j] * inv[j])

    if spec.sf_block is None and not gather:
        @T.prim_func
        def main(x: x_ann, out: out_ann, sf: sf_ann):
            body(x, None, out, sf, None)
    elif spec.sf_block is None:
        @T.prim_func
        def main(x: x_ann, out: out_ann, sf: sf_ann, pos: pos_ann):
            body(x, None, out, sf, pos)
    elif not gather:
        @T.prim_func
        def main(x: x_ann, x_sf: x_sf_ann, out: out_ann, sf: sf_ann):
            body(x, x_sf, out, sf, None)
    else:
        @T.prim_func
        def main(x: x_ann, x_sf: x_sf_ann, out: out_ann, sf: sf_ann, pos: pos_ann):
            body(x, x_sf, out, sf, pos)
    return _compile(main)


@kernel_cache
def unpack_e2m1(cols: int, out_dtype: str):
    """Packed e2m1 bytes [rows, cols] -> values [rows, 2 * cols]."""
    rows = T.dynamic("rows")

    @T.prim_func
    def main(x: T.Tensor((rows, cols), "int8"), out: T.Tensor((rows, 2 * cols), TL_DTYPE[out_dtype])):
        with T.Kernel(T.ceildiv(2 * cols, 512), T.ceildiv(rows, 8), threads=128) as (bk, bm):
            for i, j in T.Parallel(8, 512):
                r = bm * 8 + i
                c = bk * 512 + j
                byte = T.cast(x[r, c // 2], "int32") & 255
                out[r, c] = N.e2m1_value((byte >> ((c % 2) * 4)) & 15)

    return _compile(main)


@T.macro
def _row_weight(weighted, pos_to_token_topk, topk_weights, row, rows_total):
    """The routing weight of an expanded row (1 without weights, 0 for a negative position)."""
    if not weighted:
        return T.cast(1.0, "float32")
    p = T.if_then_else(row < rows_total, pos_to_token_topk[row], -1)
    return T.if_then_else(p >= 0, topk_weights[T.max(p, 0)], 0.0)


@T.macro
def _row_kept(masked, pos_to_expert, row, rows_total):
    if not masked:
        return T.cast(1, "int32")
    return T.if_then_else(row < rows_total and pos_to_expert[row] < 0, 0, 1)


@T.macro
def _swiglu(left, right, clamp, clamp_value):
    """silu(l) * r = l / (1 + exp(-l)) * r, after the optional clamp."""
    if clamp:
        left = T.min(left, clamp_value)
        right = T.max(T.min(right, clamp_value), -clamp_value)
    return left / (1.0 + T.exp(-left)) * right


@kernel_cache
def swiglu_per_token_cast(hidden: int, npc: int, in_dtype: str, round_sf: bool, sf_layout: str, weighted: bool,
                          masked: bool, clamp: bool, count: bool, clamp_min):
    """e4m3 per-token cast of silu(l) * r (* w): l, r the two halves of x [rows, 2 * hidden] (clamped first
    when clamp: l <= c, |r| <= c), w = topk_weights.flat[pos_to_token_topk[row]] (0 for negative
    positions); rows with pos_to_expert < 0 become zeros. Counts of clamped values are added to
    clamped_count[0..2] (l > c, r > c, r < -c). Parameters: x, out, sf, pos_to_token_topk, topk_weights
    (flat), pos_to_expert, clamped_count, clamp_value."""
    rows_total = T.dynamic("num_expanded_tokens")
    pairs = T.dynamic("num_token_topk")
    k_blocks = L.ceil_div(hidden, npc)
    rows = max(1, min(64, _TOKEN_TILE_ELEMS // npc))
    x_ann = T.Tensor((rows_total, 2 * hidden), TL_DTYPE[in_dtype])
    out_ann = T.Tensor((rows_total, hidden), "uint8")
    sf_ann = T.Tensor(L.sf_param_shape(sf_layout, rows_total, k_blocks, T.dynamic("sf_cols")),
                      L.storage_dtype(sf_layout))

    @T.prim_func
    def main(x: x_ann, out: out_ann, sf: sf_ann, pos_to_token_topk: T.Tensor((rows_total,), "int32"),
             topk_weights: T.Tensor((pairs,), "float32"), pos_to_expert: T.Tensor((rows_total,), "int32"),
             clamped_count: T.Tensor((3,), "int64"), clamp_value: T.float32):
        with T.Kernel(k_blocks, T.ceildiv(rows_total, rows), threads=128) as (bk, bm):
            frag = T.alloc_fragment((rows, npc), "float32")
            scale = T.alloc_fragment((rows,), "float32")
            amax = T.alloc_fragment((rows,), "float32")
            inv = T.alloc_fragment((rows,), "float32")
            r0 = bm * rows
            c0 = bk * npc
            keep = T.alloc_fragment((rows,), "int32")
            for i in T.serial(rows):
                scale[i] = _row_weight(weighted, pos_to_token_topk, topk_weights, r0 + i, rows_total)
                keep[i] = _row_kept(masked, pos_to_expert, r0 + i, rows_total)
            for i, j in T.Parallel(rows, npc):
                value = _swiglu(T.cast(x[r0 + i, c0 + j], "float32"), T.cast(x[r0 + i, hidden + c0 + j], "float32"),
                                clamp, clamp_value)
                frag[i, j] = T.if_then_else(c0 + j < hidden and keep[i] == 1, value * scale[i], 0.0)
            if count:
                flags = T.alloc_fragment((rows, npc), "float32")
                sums = T.alloc_fragment((rows,), "float32")
                totals = T.alloc_fragment((3,), "float32")
                T.clear(totals)
                for which in range(3):
                    for i, j in T.Parallel(rows, npc):
                        live = r0 + i < rows_total and c0 + j < hidden
                        v = T.cast(x[r0 + i, c0 + j + (hidden if which else 0)], "float32")
                        hit = v > clamp_value if which < 2 else v < -clamp_value
                        flags[i, j] = T.if_then_else(live and hit, 1.0, 0.0)
                    T.reduce_sum(flags, sums, dim=1)
                    for i in T.serial(rows):
                        totals[which] = totals[which] + sums[i]
                for which in range(3):
                    if totals[which] > 0.0:
                        T.atomic_add(clamped_count[which], T.cast(totals[which], "int64"))
            T.reduce_absmax(frag, amax, dim=1)
            for i in T.serial(rows):
                if r0 + i < rows_total:
                    s, s_inv, byte = N.sf_and_inv(amax[i], "e4m3", round_sf, clamp_min)
                    L.store_sf(sf, sf_layout, r0 + i, bk, s, byte)
                    inv[i] = s_inv
            for i, j in T.Parallel(rows, npc):
                out[r0 + i, c0 + j] = N.e4m3(frag[i, j] * inv[i])

    return _compile(main)


@kernel_cache
def swiglu_backward_per_token_cast(hidden: int, npc: int, round_sf: bool, clamp: bool):
    """SwiGLU backward of one expanded row per block. With l, r the decoded halves of x (clamped when
    clamp), s = sigmoid(l), w the row's routing weight (0 for a negative position) and g = grad_out:
    out = silu(l) * r * w; grad_l = g w s r (1 + l (1 - s)) and grad_r = g w s l (0 where clamped);
    weight_grad[pos] = sum(g * silu(l) * r). grad is written as bfloat16 and cast to e4m3 with one
    factor per npc channels (from the float32 values)."""
    rows = T.dynamic("num_expand_tokens")
    pairs = T.dynamic("num_token_topk")
    groups = 2 * hidden // npc

    @T.prim_func
    def main(x: T.Tensor((rows, 2 * hidden), "float8_e4m3"), x_sf: T.Tensor((rows, groups), "float32"),
             grad_out: T.Tensor((rows, hidden), "bfloat16"), weight: T.Tensor((pairs,), "float32"),
             pos_to_token_topk: T.Tensor((rows,), "int32"), token_topk_to_pos: T.Tensor((pairs,), "int32"),
             out: T.Tensor((rows, hidden), "bfloat16"), grad_fp8: T.Tensor((rows, 2 * hidden), "uint8"),
             grad_sf: T.Tensor((rows, groups), "float32"), grad: T.Tensor((rows, 2 * hidden), "bfloat16"),
             weight_grad: T.Tensor((pairs,), "float32"), clamp_value: T.float32):
        with T.Kernel(rows, threads=128) as p:
            w = T.alloc_fragment((1,), "float32")
            g = T.alloc_fragment((groups, npc), "float32")
            prod = T.alloc_fragment((1, hidden), "float32")
            dot = T.alloc_fragment((1,), "float32")
            amax = T.alloc_fragment((groups,), "float32")
            inv = T.alloc_fragment((groups,), "float32")
            w[0] = _row_weight(True, pos_to_token_topk, weight, p, rows)
            for j in T.Parallel(hidden):
                left_raw = T.cast(x[p, j], "float32") * x_sf[p, j // npc]
                right_raw = T.cast(x[p, hidden + j], "float32") * x_sf[p, (hidden + j) // npc]
                left = T.min(left_raw, clamp_value) if clamp else left_raw
                right = T.max(T.min(right_raw, clamp_value), -clamp_value) if clamp else right_raw
                denom = 1.0 + T.exp(-left)
                sig = 1.0 / denom
                go = T.cast(grad_out[p, j], "float32")
                gws = go * w[0] * sig
                grad_left = gws * right * T.fma(left, 1.0 - sig, 1.0)
                grad_right = gws * left
                if clamp:
                    grad_left = T.if_then_else(left_raw > clamp_value, 0.0, grad_left)
                    grad_right = T.if_then_else(right_raw > clamp_value or right_raw < -clamp_value, 0.0, grad_right)
                act = left / denom * right
                out[p, j] = T.cast(act * w[0], "bfloat16")
                prod[0, j] = go * act
                g[j // npc, j % npc] = grad_left
                g[(hidden + j) // npc, (hidden + j) % npc] = grad_right
                grad[p, j] = T.cast(grad_left, "bfloat16")
                grad[p, hidden + j] = T.cast(grad_right, "bfloat16")
            T.reduce_sum(prod, dot, dim=1)
            pos = pos_to_token_topk[p]
            if pos >= 0:
                weight_grad[pos] = dot[0]
            T.reduce_absmax(g, amax, dim=1)
            for q in T.serial(groups):
                s, s_inv, _ = N.sf_and_inv(amax[q], "e4m3", round_sf)
                grad_sf[p, q] = s
                inv[q] = s_inv
            for q, c in T.Parallel(groups, npc):
                grad_fp8[p, q * npc + c] = N.e4m3(g[q, c] * inv[q])
        with T.Kernel(T.ceildiv(pairs, 1024), threads=128) as b:
            for i in T.Parallel(1024):
                if token_topk_to_pos[b * 1024 + i] < 0:
                    weight_grad[b * 1024 + i] = 0.0

    return _compile(main)


# ---- e5m6 (12-bit codes, eight packed in three 32-bit words; _tl_numerics.e5m6_code) ----

@kernel_cache
def per_token_cast_e5m6(hidden: int, in_dtype: str, round_sf: bool, sf_layout: str):
    """One factor per token (TileKernels requires num_per_channels == hidden): x [tokens, hidden] ->
    words int32 [tokens, hidden / 8 * 3] and the factors."""
    tokens = T.dynamic("num_tokens")
    rows = max(1, min(8, _TOKEN_TILE_ELEMS // hidden))
    groups = hidden // 8
    sf_ann = T.Tensor(L.sf_param_shape(sf_layout, tokens, 1, T.dynamic("sf_cols")), L.storage_dtype(sf_layout))

    @T.prim_func
    def main(x: T.Tensor((tokens, hidden), TL_DTYPE[in_dtype]), out: T.Tensor((tokens, groups * 3), "int32"),
             sf: sf_ann):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as bm:
            frag = T.alloc_fragment((rows, hidden), "float32")
            amax = T.alloc_fragment((rows,), "float32")
            inv = T.alloc_fragment((rows,), "float32")
            r0 = bm * rows
            T.copy(x[r0, 0], frag)
            T.reduce_absmax(frag, amax, dim=1)
            for i in T.serial(rows):
                if r0 + i < tokens:
                    s, s_inv, byte = N.sf_and_inv(amax[i], "e5m6", round_sf)
                    L.store_sf(sf, sf_layout, r0 + i, 0, s, byte)
                    inv[i] = s_inv
            for i, g in T.Parallel(rows, groups):
                if r0 + i < tokens:
                    words = N.pack_e5m6([N.e5m6_code(frag[i, 8 * g + j] * inv[i]) for j in range(8)])
                    for w in range(3):
                        out[r0 + i, 3 * g + w] = words[w]

    return _compile(main)


@kernel_cache
def cast_back_e5m6(hidden: int, bt: int, bc: int, sf_layout: str, out_dtype: str):
    """words int32 [tokens, hidden / 8 * 3] and factors of bt x bc blocks -> value * factor."""
    tokens = T.dynamic("num_tokens")
    groups = hidden // 8
    sf_ann = T.Tensor(L.sf_param_shape(sf_layout, T.dynamic("x_sf_rows"), L.ceil_div(hidden, bc),
                                       T.dynamic("x_sf_cols")), L.storage_dtype(sf_layout))
    rows = 4

    @T.prim_func
    def main(x: T.Tensor((tokens, groups * 3), "int32"), x_sf: sf_ann, out: T.Tensor((tokens, hidden),
                                                                                      TL_DTYPE[out_dtype])):
        with T.Kernel(T.ceildiv(tokens, rows), threads=128) as bm:
            for i, g in T.Parallel(rows, groups):
                r = bm * rows + i
                if r < tokens:
                    codes = N.unpack_e5m6([x[r, 3 * g + w] for w in range(3)])
                    for j in range(8):
                        scale = L.load_sf(x_sf, sf_layout, r // bt, (8 * g + j) // bc)
                        out[r, 8 * g + j] = N.e5m6_value(codes[j]) * scale

    return _compile(main)
