// The lowering pipeline: verify -> infer_regions -> plan_pipeline -> elide_gemm_copies -> lower_tile_ops
// -> legalize_bounds -> simplify -> vectorize. TESSERA_TL_PRINT_IR=1 prints the program after every pass that changed
// it, with the time each pass took.
#pragma once

#include "tessera/tl/ir.h"
#include "tessera/tl/target.h"

namespace tessera::tl {

Program lower_program(const Program& p, const Target& target);

}  // namespace tessera::tl
