// MX-style operands for the grouped GEMM benchmarks: rows x k of e4m3 or packed e2m1 (two values per
// byte, element 2i in the low nibble) with one power-of-two (UE8M0) scale per 1 x gran_k block, stored
// packed (four exponents per int32, [rows, ceil(ceil(k/gran_k)/4)] row-major) - the SM100 layout FP4
// weights come in. Quantised like DeepGEMM's casts (amax floor 1e-4, scale = ceil_ue8m0(amax / max),
// FP4 codes by the midpoint rule).
#pragma once

#include <cstdint>

#include "tessera/core/memory.h"
#include "tessera/core/tensor.h"

namespace tessera::bench {

struct MxOperand {
  bool fp4 = false;
  int64_t rows = 0, k = 0, gran_k = 128;
  AlignedPtr<uint8_t> data;   // rows * k bytes (e4m3) or rows * k / 2 (packed e2m1)
  AlignedPtr<int32_t> scale;  // rows * scale_words()

  int64_t sf_k() const { return (k + gran_k - 1) / gran_k; }
  int64_t scale_words() const { return (sf_k() + 3) / 4; }
  int64_t row_bytes() const { return fp4 ? k / 2 : k; }
  int64_t data_bytes() const { return rows * row_bytes(); }
  int64_t scale_bytes() const { return rows * scale_words() * 4; }
  // Views of rows [0, groups * rows_per_group) as [groups, rows_per_group, ...].
  TensorView data_view(int64_t groups, int64_t rows_per_group) const;
  TensorView scale_view(int64_t groups, int64_t rows_per_group) const;
  // The values of row r the GEMM multiplies (code value * scale), k floats.
  void row_values(int64_t r, float* out) const;
};

// k must be even for FP4. Deterministic for a seed whatever the thread count.
MxOperand random_mx_operand(int64_t rows, int64_t k, bool fp4, int64_t gran_k, uint64_t seed);
MxOperand clone_mx_operand(const MxOperand& src);

}  // namespace tessera::bench
