// The dense-prefill backward's element-wise steps compiled with the neon folder's flags (see
// mla_bwd_kernel_set.h).
#include <stdint.h>
#include <string.h>

#include "backends/cpu/mla_bwd_kernel_set.h"

namespace tessera::cpu {
namespace {
#include "backends/cpu/mla_bwd_tiles.inc"
}  // namespace

const MlaBwdTileOps* mla_bwd_ops_neon() {
  return &kOps;
}

}  // namespace tessera::cpu
