// Vectorisation: the innermost T.Parallel loop of each nest becomes a vectorized loop (ForKind::
// kVectorized, TESSERA_TL_VW lanes, masked tail) when its body is element-wise - stores whose address
// moves with the loop variable, loads, arithmetic, math and conditionals. Every other parallel loop
// (outer loops, bodies with runtime calls or atomics, stores to one address) becomes a serial loop: a
// block runs on one thread, so T.Parallel is a vectorisation hint, not a thread split.
#pragma once

#include "tessera/tl/ir.h"
#include "tessera/tl/target.h"

namespace tessera::tl {

Stmt vectorize(const Stmt& s, const Target& target);

}  // namespace tessera::tl
