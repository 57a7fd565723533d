// The e4m3-weight decode GEMV on AMX tiles (gemv_amx_e4m3.cc), called by gemv_amx.cc's entry point.
#pragma once

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu::amx {

// GemvArgs as for GemvFn, w_type kE4M3 and e4m3 activations; scratch holds at least 16 * K (rounded
// up to 64) bytes.
void gemv_e4m3(const GemvArgs& p);

}  // namespace tessera::cpu::amx
