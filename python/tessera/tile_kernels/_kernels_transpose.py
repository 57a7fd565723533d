"""Tile-language kernel of tessera.tile_kernels.transpose: out[b, j, i] = x[b, i, j].

A block reads a 64 x 128 tile (64 x 64 for 8-byte values) row by row into an on-chip buffer and writes
it out row by row of the output, so both DRAM streams are contiguous and the transposition happens in
L1. The buffer holds 4- or 8-byte values: the code generation reads its columns through register-block
transposes of such values (docs/tl.md, "transposed reads"). 16- and 8-bit elements go 2 or 4 input rows
to an int32 word when the row count is a multiple of that (batched_transpose_packed; the output viewed
as int32), else one to an int32. Byte-sized dtypes (fp8) travel as uint8 and bf16 as int16, so the
bits are moved, never converted.
"""

from .. import language as T
from ..tl import compile as tl_compile
from ._kernel_cache import kernel_cache

_TILE = 64
# Tiles read 128 columns (more of each input row's cache lines per visit): 1.2-1.4x over 64 once the
# column reads were register transposes (docs/notes/2026-12-05-tl-register-transpose.md); 8-byte
# buffers keep 64 x 64 (32 KiB, the L1's size).
_WIDE_TILE_COLS = 128


# Output rows up to this many bytes: consecutive blocks walk down the input (rows first), finishing
# each output row in a few blocks; longer rows: along the input's columns, continuing its row streams.
# 8 x 256 x 7168 (256- and 512-byte output rows) 1.4x faster rows first, 1024 x 7168 bf16 (2 KiB) 1.1x
# slower (docs/notes/2026-12-05-tl-register-transpose.md).
ROWS_FIRST_MAX_OUT_ROW_BYTES = 1024


@kernel_cache
def batched_transpose(dtype: str, buffer_dtype: str, rows_first: bool = False):
    batches, rows, cols = T.dynamic("num_batches"), T.dynamic("shape_x"), T.dynamic("shape_y")
    tr, tc = _TILE, _TILE if buffer_dtype in ("int64", "float64") else _WIDE_TILE_COLS
    # block ids run over grid dimension 0 first, and a thread takes runs of consecutive ids
    grid = (T.ceildiv(rows, tr), T.ceildiv(cols, tc)) if rows_first else (T.ceildiv(cols, tc), T.ceildiv(rows, tr))

    @T.prim_func
    def main(x: T.Tensor((batches, rows, cols), dtype), out: T.Tensor((batches, cols, rows), dtype)):
        with T.Kernel(grid[0], grid[1], batches, threads=256) as (g0, g1, b):
            bx, by = (g0, g1) if rows_first else (g1, g0)
            tile = T.alloc_shared((tr, tc), buffer_dtype)
            T.copy(x[b, bx * tr:(bx + 1) * tr, by * tc:(by + 1) * tc], tile)
            for i, j in T.Parallel(tc, tr):
                out[b, by * tc + i, bx * tr + j] = T.cast(tile[j, i], dtype)

    return tl_compile(main)


@kernel_cache
def batched_transpose_packed(dtype: str, pack: int):
    """The transpose of 1- or 2-byte values with ``pack`` = 4 / itemsize input rows joined per 32-bit
    value: the block's buffer holds one int32 per column of each row group, so one int32 transpose
    moves ``pack`` values and the output (viewed as int32 [B, N, M / pack]) takes them unwidened.
    x's rows must be a multiple of ``pack`` (the caller's rule). Blocks walk along the input's columns
    (rows first measured equal up to one block of rows, slower beyond)."""
    batches, rows, cols = T.dynamic("num_batches"), T.dynamic("shape_x"), T.dynamic("shape_y")
    groups = T.dynamic("row_groups")  # rows / pack
    bits = 32 // pack
    mask = (1 << bits) - 1
    tr, tc = _TILE, _WIDE_TILE_COLS  # tr row groups: pack * tr input rows

    @T.prim_func
    def main(x: T.Tensor((batches, rows, cols), dtype), out: T.Tensor((batches, cols, groups), "int32")):
        with T.Kernel(T.ceildiv(cols, tc), T.ceildiv(groups, tr), batches, threads=256) as (by, bx, b):
            tile = T.alloc_shared((tr, tc), "int32")
            for i, j in T.Parallel(tr, tc):
                r = (bx * tr + i) * pack
                word = T.cast(x[b, r, by * tc + j], "int32") & mask
                for k in range(1, pack):
                    word = word | ((T.cast(x[b, r + k, by * tc + j], "int32") & mask) << (bits * k))
                tile[i, j] = word
            for i, j in T.Parallel(tc, tr):
                out[b, by * tc + i, bx * tr + j] = tile[j, i]

    return tl_compile(main)
