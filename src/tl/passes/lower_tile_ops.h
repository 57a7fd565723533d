// Tile-op lowering: replaces every copy, gemm, fill, reduce, cumsum and atomic by loops and runtime
// calls, using the implementation the target's registry prefers (tile_op_registry.h). Throws
// kNotImplemented naming the op, its line and every refusal when no implementation accepts an op.
#pragma once

#include "tessera/tl/ir.h"
#include "tessera/tl/target.h"

namespace tessera::tl {

Stmt lower_tile_ops(const Stmt& s, const Target& target);

}  // namespace tessera::tl
