"""tessera.language - the tile language (``import tessera.language as T``).

TileLang's kernel language on tessera's CPU compiler: write a kernel as a grid of blocks working on
tiles, then compile it with ``@tessera.jit``. docs/tl.md lists every construct and every difference
from TileLang.

    import tessera
    import tessera.language as T

    @tessera.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=64, dtype="bfloat16"):
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                A_s = T.alloc_shared((block_M, block_K), dtype)
                B_s = T.alloc_shared((block_K, block_N), dtype)
                C_l = T.alloc_fragment((block_M, block_N), "float32")
                T.clear(C_l)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_l)
                T.copy(C_l, C[by * block_M, bx * block_N])
        return main
"""
from ._dtypes import (DType, bfloat16, bool, double, dtype, float, float4_e2m1, float4_e2m1fn,  # noqa: A004
                      float8_e4m3, float8_e4m3fn, float8_e5m2, float16, float32, float64, half, int, int8, int16, int32, int64, tfloat32, uint, uint8, uint16,
                      uint32, uint64)
from ._eager import const, empty
from ._expr import Buffer as BufferProxy
from ._expr import BufferRef, DynamicDim, Expr, VarBuffer
from ._kernel import (FragmentBuffer, Kernel, LocalBuffer, ParamInfo, PrimFunc, SharedBuffer, StridedTensor, Tensor,
                      alloc_global, dynamic, macro, prim_func, symbolic)
from ._allreduce import attr, comm_reducer, evaluate, tvm_thread_allreduce
from ._bits import popcount, reinterpret
from ._extern import call_extern
from ._reducers import alloc_reducer, finalize_reducer, reducer_init, reducer_update
from ._threads import (get_lane_idx, get_thread_binding, get_warp_group_idx, get_warp_idx, get_warp_idx_sync,
                       thread_binding, thread_return)
from ._pointers import make_tensor, ptr
from ._views import im2col, reshape, view
from ._warp import (shfl_down, shfl_sync, shfl_up, shfl_xor, warp_reduce_bitand, warp_reduce_bitor, warp_reduce_max,
                    warp_reduce_min, warp_reduce_sum)
from ._loops import Parallel, Persistent, Pipelined, grid, serial, unroll, vectorized
from ._math import (Cast, Select, abs, bitwise_and, bitwise_or, bitwise_xor, ceil, ceildiv, clamp, copysign, cos,  # noqa: A004
                    decode_e2m1, erf, exp, exp2, floor, floordiv, floormod, fma, isfinite, truncmod, if_then_else, infinity, isinf, isnan, log, log1p, log2, max, max_value, min, min_value, pow, round,
                    rsqrt, sigmoid, sin, sqrt, tanh, truncdiv, trunc)
from ._grid_sync import sync_grid
from ._ops import (Fragment, Layout, alloc_fragment, assume, async_copy, device_assert, pdl_sync, pdl_trigger,
                   ptx_commit_group, ptx_wait_group, alloc_local, alloc_shared, alloc_var, annotate_layout, atomic_add, atomic_max,
                   atomic_min, clear, copy, cumsum, fill, gemm, no_set_max_nreg, reduce, reduce_absmax, reduce_abssum,
                   reduce_max, reduce_min, reduce_sum, sync_threads, sync_warp, use_swizzle)

Buffer = Tensor  # TileLang accepts T.Buffer as the parameter annotation too
Serial = serial  # TileLang spells it both ways


class GemmWarpPolicy:
    """Accepted for source compatibility; the CPU gemm has no warp partition."""
    Square = "Square"
    FullRow = "FullRow"
    FullCol = "FullCol"


def alloc_buffer(shape, dtype, scope="global"):
    """TileLang's generic allocation: scope "global" is T.alloc_global, "shared*" T.alloc_shared,
    "local.fragment" T.alloc_fragment, other "local*" T.alloc_local."""
    scope = str(scope)
    if scope == "global":
        return alloc_global(shape, dtype)
    if scope.startswith("shared"):
        return alloc_shared(shape, dtype)
    if scope == "local.fragment":
        return alloc_fragment(shape, dtype)
    return alloc_local(shape, dtype)


def cast(value, dtype):
    """T.cast(value, dtype) (TileLang's argument order); see also T.Cast(dtype, value)."""
    return Cast(dtype, value)
