// Bounds legalisation for tails: every access to a global buffer that cannot be proven in range gets a
// guard - loads read 0 outside the tensor, stores and atomics outside it are skipped (TileLang's
// semantics for tiles that overhang the tensor edge). Accesses proven in range by constant intervals
// (loop extents, grid sizes, enclosing conditions) stay unguarded.
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

Stmt legalize_bounds(const Stmt& s);

}  // namespace tessera::tl
