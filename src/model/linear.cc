// Linear layers (linear.h).
#include "linear.h"

#include <algorithm>

#include "small_ops.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm.h"

namespace tessera::model {

namespace {
thread_local bool batch_invariant = false;
}

BatchInvariantScope::BatchInvariantScope(bool on) : previous_(batch_invariant) {
  batch_invariant = on;
}
BatchInvariantScope::~BatchInvariantScope() {
  batch_invariant = previous_;
}
int64_t gemm_rows(int64_t rows) {
  return batch_invariant ? std::max(rows, kBatchInvariantRows) : rows;
}

QuantRows quantize_activations(const float* x, int64_t rows, int64_t k, bool ue8m0) {
  QuantRows q;
  q.rows = rows;
  q.k = k;
  q.codes.resize(size_t(rows * k));
  q.scales.resize(size_t(rows * (k / 128)));
  q8_rows(x, rows, k, ue8m0, q.codes.data(), q.scales.data());
  return q;
}

void linear_forward_quantized(const Linear& l, const uint8_t* codes, const float* scales, int64_t rows, float* y) {
  if (rows == 0) return;
  if (const int64_t padded = gemm_rows(rows); padded > rows) {
    std::vector<uint8_t> c(size_t(padded * l.k), 0);
    std::vector<float> s(size_t(padded * (l.k / 128)), 1.0f), out(size_t(padded * l.n));
    std::copy_n(codes, rows * l.k, c.data());
    std::copy_n(scales, rows * (l.k / 128), s.data());
    linear_forward_quantized(l, c.data(), s.data(), padded, out.data());
    std::copy_n(out.data(), rows * l.n, y);
    return;
  }
  gemm::ScaledTensor a{TensorView(const_cast<uint8_t*>(codes), DType::kF8E4M3, {rows, l.k}),
                       TensorView(const_cast<float*>(scales), DType::kF32, {rows, l.k / 128})};
  gemm::ScaledTensor b{TensorView(const_cast<uint8_t*>(l.weight), DType::kF8E4M3, {l.n, l.k}),
                       TensorView(const_cast<float*>(l.scale), DType::kF32, {(l.n + 127) / 128, (l.k + 127) / 128})};
  gemm::Recipe recipe;
  recipe.recipe = std::array<int, 3>{1, 128, 128};
  gemm::fp8_fp4_gemm_nt(a, b, TensorView(y, DType::kF32, {rows, l.n}), nullptr, recipe);
}

void LinearInput::forward(const Linear& l, float* y) {
  TESSERA_CHECK(l.k == k_, "Model: a linear of K = ", l.k, " reads activations of K = ", k_);
  if (!l.fp8 || rows_ == 0) {
    linear_forward(l, x_, rows_, y, ue8m0_);
    return;
  }
  if (!quantized_) {
    q_ = quantize_activations(x_, rows_, k_, ue8m0_);
    quantized_ = true;
  }
  linear_forward_quantized(l, q_.codes.data(), q_.scales.data(), rows_, y);
}

void linear_forward(const Linear& l, const float* x, int64_t rows, float* y, bool ue8m0) {
  if (rows == 0) return;
  if (l.fp8) {
    const QuantRows q = quantize_activations(x, rows, l.k, ue8m0);
    linear_forward_quantized(l, q.codes.data(), q.scales.data(), rows, y);
    return;
  }
  const int64_t padded = gemm_rows(rows);
  std::vector<uint16_t> xb(size_t(padded * l.k), 0);
  f32_to_bf16_row(x, rows * l.k, xb.data());
  std::vector<float> out(padded > rows ? size_t(padded * l.n) : 0);
  gemm::bf16_gemm_nt(TensorView(xb.data(), DType::kBF16, {padded, l.k}),
                     TensorView(const_cast<uint8_t*>(l.weight), DType::kBF16, {l.n, l.k}),
                     TensorView(padded > rows ? out.data() : y, DType::kF32, {padded, l.n}));
  if (padded > rows) std::copy_n(out.data(), rows * l.n, y);
}

}  // namespace tessera::model
