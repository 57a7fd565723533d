// Building blocks of tile-op lowerings.
#pragma once

#include <functional>
#include <vector>

#include "tessera/tl/ir.h"

namespace tessera::tl {

// A nest of loops of `kind` over extents (outermost first); body gets the loop variables.
Stmt loop_nest(const std::vector<Expr>& extents, const std::function<Stmt(const std::vector<Expr>&)>& body, Loc loc,
               ForKind kind = ForKind::kParallel, const char* prefix = "i");
// Index of element (row, col) of a 2-D tile region (its last two dims; leading dims at their min).
std::vector<Expr> matrix_index(const Region& r, const Expr& row, const Expr& col);
// The neutral element of a reduction, and the combination of an accumulator with a new value.
Expr reduce_identity(ReduceKind op, DataType t, Loc loc);
Expr reduce_combine(ReduceKind op, const Expr& acc, const Expr& value, Loc loc);

}  // namespace tessera::tl
