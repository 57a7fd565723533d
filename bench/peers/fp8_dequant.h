// The first step of the FP8 peer ("dequantise, then oneDNN bf16 matmul"): e4m3 values times their
// fp32 block scales, rounded to bf16 (nearest even). The caller runs row ranges in parallel (on
// oneDNN's threads: see OnednnMatmul::parallel_for).
#pragma once

#include <cstdint>

#include "gemm/gemm_operands.h"

namespace tessera::bench {

// Rows [r0, r1) of src into the same rows of out, row-major [src.rows, src.cols] bf16. src must be
// kF8E4M3 without NaN codes (the benchmark quantisers saturate, so they never produce one).
void dequantize_fp8_rows_to_bf16(const GemmOperand& src, int64_t r0, int64_t r1, uint16_t* out);

}  // namespace tessera::bench
