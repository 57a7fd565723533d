// The first T.gemm of a K loop clears its accumulator instead of adding to a fresh T.clear: the pattern
// `T.clear(C); for k: ...; T.gemm(A, B, C)` (every GEMM kernel) becomes `for k: T.gemm(A, B, C,
// clear_accum = (k == first))`, with the clear kept only for a loop that runs no iteration. On the CPU
// the clear was a pass over the whole accumulator (256 KiB for a 512 x 128 fp32 tile) and the first
// product then read it back; a clearing T.gemm writes C once. Applies when nothing between the clear
// and the loop, and nothing before the T.gemm in the loop body, touches C, and the T.gemm is a
// statement of the loop body itself. Runs after plan_pipeline (pipelined loops are serial then).
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

Stmt first_gemm_clears(const Stmt& s);

}  // namespace tessera::tl
