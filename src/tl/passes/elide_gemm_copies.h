// Copy elision for gemm operands: a shared buffer that is filled by one T.copy of a global tile (same
// dtype) and read only as a T.gemm operand later in the same statement list is dropped, and the gemm
// reads the global tile itself. On the CPU the tile GEMM packs (or reads in place) from the tensor
// directly and treats the part of a tile past the tensor edge as zeros, so the copy was pure overhead.
// Runs after plan_pipeline (the prefetches of the copy stay).
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

Stmt elide_gemm_copies(const Stmt& s);

}  // namespace tessera::tl
