// tessera/tl/runtime.h - the one header a generated tile-language kernel includes.
//
// It is self-contained (C++ standard library only) and is compiled into each kernel for the machine the
// kernel is built on: TESSERA_TL_VW (the lanes of a vectorized loop) is defined by the generated source.
// libtessera embeds these headers and writes them next to the kernel sources it compiles, so neither a
// pip install nor an AOT user needs them installed (src/tl/runtime/embedded_headers.cc).
//   runtime/abi.h     C interface between kernel libraries and their loader (TlRuntime, TlLaunchArgs)
//   runtime/scalar.h  storage conversions and math of single values
//   runtime/vector.h  vector types, loads/stores of every dtype, vector math
//   runtime/transpose.h  VW x VW block transposes in registers (transposed reads of on-chip buffers),
//                        on the shuffles of runtime/transpose_blocks.h
//   runtime/ops.h     row reductions, atomics, prefetch, the tile GEMM call
//   runtime/packed_fp4.h  global float4 e2m1 tensors (two codes per byte) as `nibbles` pointers
#pragma once

#include "tessera/tl/runtime/abi.h"
#include "tessera/tl/runtime/ops.h"
#include "tessera/tl/runtime/packed_fp4.h"
#include "tessera/tl/runtime/scalar.h"
#include "tessera/tl/runtime/transpose.h"
#include "tessera/tl/runtime/vector.h"

#define TESSERA_TL_EXPORT extern "C" __attribute__((visibility("default")))
