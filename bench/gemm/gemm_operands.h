// GEMM operands as the benchmarks hold them: an R x K matrix (K contiguous) of bf16, or of e4m3 with
// fp32 scale factors per (gran_rows x 128) block - DeepGEMM's per-token (1,128) activations and
// per-block (128,128) weights.
#pragma once

#include <cstdint>

#include "tessera/core/dtype.h"
#include "tessera/core/memory.h"
#include "tessera/core/tensor.h"

namespace tessera::bench {

struct GemmOperand {
  static constexpr int64_t kGranK = 128;

  DType dtype = DType::kBF16;  // kBF16 or kF8E4M3
  int64_t rows = 0, cols = 0;
  int64_t gran_rows = 1;     // fp8 only: rows per scale factor
  AlignedPtr<uint8_t> data;  // rows * cols elements, row-major
  AlignedPtr<float> scale;   // fp8 only: [scale_rows(), scale_cols()] row-major

  int64_t scale_rows() const { return (rows + gran_rows - 1) / gran_rows; }
  int64_t scale_cols() const { return (cols + kGranK - 1) / kGranK; }
  int64_t data_bytes() const { return rows * cols * dtype_storage_bytes(dtype); }
  int64_t scale_bytes() const { return dtype == DType::kF8E4M3 ? scale_rows() * scale_cols() * 4 : 0; }
  int64_t bytes() const { return data_bytes() + scale_bytes(); }

  TensorView data_view() const { return TensorView(data.get(), dtype, {rows, cols}); }
  TensorView scale_view() const { return TensorView(scale.get(), DType::kF32, {scale_rows(), scale_cols()}); }
  // The values of row r the GEMM multiplies: bf16 -> f32, fp8 -> e4m3 value * its block scale (fp32).
  void row_values(int64_t r, float* out) const;
};

GemmOperand random_bf16_operand(int64_t rows, int64_t cols, uint64_t seed);
// Quantises near-standard-normal values: per block amax (at least 1e-4), scale = amax / 448,
// q = e4m3(x * (1 / scale)) saturated - DeepGEMM's per_token / per_block casts.
GemmOperand random_fp8_operand(int64_t rows, int64_t cols, int64_t gran_rows, uint64_t seed);
GemmOperand clone_operand(const GemmOperand& src);
// The effective values (row_values) as a row-major fp32 matrix, for fp32 peers.
AlignedPtr<float> operand_to_f32(const GemmOperand& op);

}  // namespace tessera::bench
