// Linear layers on tessera's GEMMs: FP8 weights through fp8_fp4_gemm_nt with per-token 1x128 activation
// scales from q8 and the weights' 128x128 block scales; bf16 weights through bf16_gemm_nt on x rounded
// to bf16. Output f32.
#pragma once

#include <cstdint>
#include <vector>

#include "weights.h"

namespace tessera::model {

// Activations quantised by q8 (small_ops.h): codes [rows, k] e4m3 and scales [rows, k/128].
struct QuantRows {
  int64_t rows = 0, k = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
QuantRows quantize_activations(const float* x, int64_t rows, int64_t k, bool ue8m0);

// Batch invariance (ModelOptions::batch_invariant). tessera's GEMMs pick a kernel, and with it the
// summation order of each row, by M: the decode GEMVs take M <= 8, the packed driver larger M, whose
// rows do not depend on M. Inside a BatchInvariantScope every GEMM of the step gets at least
// kBatchInvariantRows rows (zero rows appended), so a row's bits do not depend on which batch, or rank,
// it runs in. Thread-local: a step runs on its caller's thread (the kernels parallelise inside).
constexpr int64_t kBatchInvariantRows = 9;
class BatchInvariantScope {
 public:
  explicit BatchInvariantScope(bool on);
  ~BatchInvariantScope();
  BatchInvariantScope(const BatchInvariantScope&) = delete;
  BatchInvariantScope& operator=(const BatchInvariantScope&) = delete;

 private:
  bool previous_;
};
// The rows a GEMM over `rows` rows must run: rows, or kBatchInvariantRows inside the scope when fewer.
int64_t gemm_rows(int64_t rows);

// y [rows, l.n] = x [rows, l.k] W^T.
void linear_forward(const Linear& l, const float* x, int64_t rows, float* y, bool ue8m0);

// Activations [rows, k] read by several linears: FP8 ones share one quantisation, made on first use.
class LinearInput {
 public:
  LinearInput(const float* x, int64_t rows, int64_t k, bool ue8m0) : x_(x), rows_(rows), k_(k), ue8m0_(ue8m0) {}
  const float* data() const { return x_; }
  // y [rows, l.n] = x W^T, as linear_forward computes it.
  void forward(const Linear& l, float* y);

 private:
  const float* x_;
  int64_t rows_, k_;
  bool ue8m0_, quantized_ = false;
  QuantRows q_;
};
// The same from pre-quantised rows (FP8 weights only): lets callers quantise once and gather rows.
void linear_forward_quantized(const Linear& l, const uint8_t* codes, const float* scales, int64_t rows, float* y);

}  // namespace tessera::model
