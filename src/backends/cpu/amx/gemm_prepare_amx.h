// The AMX GEMM set's a-side preparation and scale folding (gemm_prepare_amx.cc), for gemm_ukr_amx.cc's
// kernel set. Signatures as GemmKernelSet::prepare_a, prepare_a_folded and fold_b_scales.
#pragma once

#include <stdint.h>

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu::amx {

const void* prepare_a(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                      int64_t* lda);
const void* prepare_a_folded(const GemmSrc& src, int64_t r0, int rows, int64_t k0, int kc, int64_t k_total, void* buf,
                             int64_t* lda, const float* scale, int64_t scale_stride, int group);
void fold_b_scales(void* panels, int cols, int nr, int kc, int group, const float* scale, int64_t scale_stride);

}  // namespace tessera::cpu::amx
