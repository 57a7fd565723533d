// Simplification: constant folding and a canonical linear form for integer index arithmetic.
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

// Folds constants, cancels linear integer terms ((k + 1) * 64 - k * 64 -> 64), removes identities
// (x * 1, x + 0, min(x, x)) and decides comparisons of constants. Never changes a value.
Expr simplify(const Expr& e);
// Simplifies every expression; drops if-statements and loops whose outcome is decided by constants.
Stmt simplify(const Stmt& s);
// Deep equality (variables and buffers by identity).
bool structural_equal(const Expr& a, const Expr& b);

}  // namespace tessera::tl
