// The dense-prefill backward tile math compiled with the avx512 folder's flags (see mla_bwd_kernel_set.h).
#include <math.h>

#include "backends/cpu/mla_bwd_kernel_set.h"

namespace tessera::cpu {
namespace {
#include "backends/cpu/mla_bwd_tiles.inc"
}  // namespace

const MlaBwdKernelSet& mla_bwd_kernels_avx512() { return kSet; }

}  // namespace tessera::cpu
