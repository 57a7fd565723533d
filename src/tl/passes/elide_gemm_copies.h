// Copy elision for gemm operands: a shared buffer that is filled by one T.copy of a global tile (same
// dtype) and read only as a T.gemm operand later in the same statement list is dropped, and the gemm
// reads the global tile itself. On the CPU the tile GEMM packs (or reads in place) from the tensor
// directly and treats the part of a tile past the tensor edge as zeros, so the copy was pure overhead.
// Runs before plan_pipeline, so an elided copy gets no whole-tile prefetch of the next step: the tile
// GEMM reads its operands a K chunk at a time and prefetches the next chunk itself, and a burst over the
// whole next tile (512 KiB for a 512 x 512 bf16 tile) was evicted from L2 before its use (lab note
// docs/notes/2026-12-05-tl-gemm-prefetch.md).
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

Stmt elide_gemm_copies(const Stmt& s);

}  // namespace tessera::tl
