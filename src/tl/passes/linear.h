// Linear analysis of integer index expressions with respect to one loop variable.
#pragma once

#include <cstdint>

#include "tessera/tl/ir.h"

namespace tessera::tl {

// Writes e = base + coeff * var with a constant coeff and a base free of var; false when e is not of
// that form (e.g. var * n with a symbolic n, or var // 2).
bool linear_in(const Expr& e, const Expr& var, Expr* base, int64_t* coeff);

}  // namespace tessera::tl
