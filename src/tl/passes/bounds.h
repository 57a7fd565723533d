// Constant interval analysis of integer expressions, used to prove accesses in range (no guard needed)
// and to reject constant tiles and indices that fall outside on-chip buffers.
#pragma once

#include <cstdint>
#include <map>

#include "tessera/tl/ir.h"

namespace tessera::tl {

struct Interval {
  bool has_lo = false, has_hi = false;
  int64_t lo = 0, hi = 0;  // inclusive
  static Interval point(int64_t v) { return {true, true, v, v}; }
  static Interval range(int64_t lo, int64_t hi) { return {true, true, lo, hi}; }
  static Interval everything() { return {}; }
  bool bounded() const { return has_lo && has_hi; }
};

// Ranges of variables (keyed by Var node) known at a program point.
using RangeMap = std::map<const Node*, Interval>;

Interval bound_of(const Expr& e, const RangeMap& ranges);
// Narrows ranges with a condition that holds (conjunctions of `var op constant` comparisons).
void refine_with_condition(const Expr& cond, RangeMap* ranges);
// The range of a loop variable from the loop's min and extent, if both bound.
Interval loop_range(const Expr& min, const Expr& extent, const RangeMap& ranges);

}  // namespace tessera::tl
