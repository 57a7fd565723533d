// Shape inference for tile operations: fills in the extents of "corner" operands from the other operand
// (T.copy(A[by * 128, k * 32], A_shared) copies a 128 x 32 tile), normalises reduction dims, and checks
// that operand shapes agree (copy, gemm M/N/K, reduce, cumsum, atomic) and that constant tiles lie inside
// on-chip buffers. Errors name the op, both shapes and the source line.
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

Stmt infer_regions(const Stmt& s);

}  // namespace tessera::tl
