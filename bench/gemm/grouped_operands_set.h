// The operands of one grouped benchmark case, in every dtype the cases use: weights B as G stacked
// [N, K] matrices (with copies to rotate through for DRAM-bound cases) and activations A as rows.
// bf16 and fp8 ((1,128) activations, (128,128) weights, fp32 scales) use GemmOperand; FP8 x FP4 uses
// MxOperand (packed UE8M0 scales, (1,128) x (1,32)).
#pragma once

#include <cstdint>
#include <vector>

#include "gemm/gemm_operands.h"
#include "gemm/grouped_cases.h"
#include "gemm/grouped_check.h"
#include "gemm/grouped_operands.h"
#include "tessera/gemm_grouped.h"

namespace tessera::bench {

class GroupedWeights {
 public:
  GroupedWeights(GroupedType type, int64_t groups, int64_t n, int64_t k, uint64_t seed);
  // Adds copies until all of them together exceed `bytes` (for DRAM-bound cases).
  void add_copies_beyond(int64_t bytes);

  int copies() const { return int(type_ == GroupedType::kFp8Fp4 ? mx_.size() : plain_.size()); }
  TensorView data(int copy) const;                      // [G, N, K] (bytes of packed FP4)
  TensorView scale(int copy) const;                     // fp8: [G, N/128, ceil(K/128)]; MX: [G, N, words]
  gemm::ScaledTensor group(int copy, int64_t g) const;  // [N, K] of group g with its scales
  TensorView group_data(int copy, int64_t g) const;     // bf16 [N, K] of group g
  RowValues row_values() const;                         // effective values of row g * N + j of copy 0
  int64_t data_bytes() const;                           // one copy's data (packed bytes for FP4)
  int64_t bytes() const;                                // one copy's data and scales

 private:
  GroupedType type_;
  int64_t groups_, n_, k_;
  std::vector<GemmOperand> plain_;
  std::vector<MxOperand> mx_;
};

class GroupedActivations {
 public:
  GroupedActivations(GroupedType type, int64_t rows, int64_t k, uint64_t seed);
  // Zeroes the data of rows [r0, r1) (padding rows of contiguous layouts; their scales stay valid).
  void zero_rows(int64_t r0, int64_t r1);

  TensorView data(int64_t r0, int64_t rows) const;                             // [rows, K]
  gemm::ScaledTensor scaled(int64_t r0, int64_t rows) const;                   // [rows, K] with its scales
  gemm::ScaledTensor scaled_3d(int64_t groups, int64_t rows_per_group) const;  // [G, R, K]
  TensorView data_3d(int64_t groups, int64_t rows_per_group) const;
  RowValues row_values() const;
  int64_t bytes() const;

 private:
  GroupedType type_;
  int64_t rows_, k_;
  GemmOperand plain_;
  MxOperand mx_;
};

// The recipe each type runs with: defaults for bf16 / fp8 fp32 scales, (1,128) x (1,32) for MX.
gemm::Recipe grouped_recipe(GroupedType type);

}  // namespace tessera::bench
