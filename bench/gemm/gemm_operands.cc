#include "gemm/gemm_operands.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "random_fill.h"
#include "tessera/core/thread_pool.h"

namespace tessera::bench {

void GemmOperand::row_values(int64_t r, float* out) const {
  if (dtype == DType::kBF16) {
    const uint8_t* row = data.get() + 2 * r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      uint16_t h;
      std::memcpy(&h, row + 2 * c, 2);
      out[c] = bf16_to_f32(h);
    }
    return;
  }
  const uint8_t* row = data.get() + r * cols;
  const float* row_scale = scale.get() + (r / gran_rows) * scale_cols();
  for (int64_t c = 0; c < cols; ++c) out[c] = e4m3_to_f32(row[c]) * row_scale[c / kGranK];
}

GemmOperand random_bf16_operand(int64_t rows, int64_t cols, uint64_t seed) {
  GemmOperand op;
  op.dtype = DType::kBF16;
  op.rows = rows;
  op.cols = cols;
  op.data = aligned_array<uint8_t>(size_t(op.data_bytes()));
  uint16_t* out = reinterpret_cast<uint16_t*>(op.data.get());
  for_random_normal_blocks(rows, cols, 64, seed, [&](int64_t r0, int64_t nr, const float* v) {
    for (int64_t i = 0; i < nr * cols; ++i) out[r0 * cols + i] = f32_to_bf16(v[i]);
  });
  return op;
}

GemmOperand random_fp8_operand(int64_t rows, int64_t cols, int64_t gran_rows, uint64_t seed) {
  GemmOperand op;
  op.dtype = DType::kF8E4M3;
  op.rows = rows;
  op.cols = cols;
  op.gran_rows = gran_rows;
  op.data = aligned_array<uint8_t>(size_t(op.data_bytes()));
  op.scale = aligned_array<float>(size_t(op.scale_rows() * op.scale_cols()));
  const int64_t sc = op.scale_cols();
  for_random_normal_blocks(rows, cols, gran_rows, seed, [&](int64_t r0, int64_t nr, const float* v) {
    for (int64_t kb = 0; kb < sc; ++kb) {
      const int64_t c0 = kb * GemmOperand::kGranK, c1 = std::min(cols, c0 + GemmOperand::kGranK);
      float amax = 0.0f;
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(v[r * cols + c]));
      const float sf = std::max(amax, 1e-4f) / 448.0f, inv = 1.0f / sf;
      op.scale[size_t((r0 / gran_rows) * sc + kb)] = sf;
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t c = c0; c < c1; ++c) op.data[size_t((r0 + r) * cols + c)] = f32_to_e4m3_sat(v[r * cols + c] * inv);
    }
  });
  return op;
}

GemmOperand clone_operand(const GemmOperand& src) {
  GemmOperand op;
  op.dtype = src.dtype;
  op.rows = src.rows;
  op.cols = src.cols;
  op.gran_rows = src.gran_rows;
  op.data = aligned_array<uint8_t>(size_t(src.data_bytes()));
  std::memcpy(op.data.get(), src.data.get(), size_t(src.data_bytes()));
  if (src.scale) {
    op.scale = aligned_array<float>(size_t(src.scale_rows() * src.scale_cols()));
    std::memcpy(op.scale.get(), src.scale.get(), size_t(src.scale_bytes()));
  }
  return op;
}

AlignedPtr<float> operand_to_f32(const GemmOperand& op) {
  auto out = aligned_array<float>(size_t(op.rows * op.cols));
  float* o = out.get();
  parallel_for(op.rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) op.row_values(r, o + r * op.cols);
  });
  return out;
}

}  // namespace tessera::bench
