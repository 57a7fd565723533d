// Linear layers (linear.h).
#include "linear.h"

#include "small_ops.h"
#include "tessera/core/dtype.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm.h"

namespace tessera::model {

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
  gemm::ScaledTensor a{TensorView(const_cast<uint8_t*>(codes), DType::kF8E4M3, {rows, l.k}),
                       TensorView(const_cast<float*>(scales), DType::kF32, {rows, l.k / 128})};
  gemm::ScaledTensor b{TensorView(const_cast<uint8_t*>(l.weight), DType::kF8E4M3, {l.n, l.k}),
                       TensorView(const_cast<float*>(l.scale), DType::kF32, {(l.n + 127) / 128, (l.k + 127) / 128})};
  gemm::Recipe recipe;
  recipe.recipe = std::array<int, 3>{1, 128, 128};
  gemm::fp8_fp4_gemm_nt(a, b, TensorView(y, DType::kF32, {rows, l.n}), nullptr, recipe);
}

void linear_forward(const Linear& l, const float* x, int64_t rows, float* y, bool ue8m0) {
  if (rows == 0) return;
  if (l.fp8) {
    const QuantRows q = quantize_activations(x, rows, l.k, ue8m0);
    linear_forward_quantized(l, q.codes.data(), q.scales.data(), rows, y);
    return;
  }
  std::vector<uint16_t> xb(size_t(rows * l.k));
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = f32_to_bf16(x[i]);
  gemm::bf16_gemm_nt(TensorView(xb.data(), DType::kBF16, {rows, l.k}),
                     TensorView(const_cast<uint8_t*>(l.weight), DType::kBF16, {l.n, l.k}),
                     TensorView(y, DType::kF32, {rows, l.n}));
}

}  // namespace tessera::model
