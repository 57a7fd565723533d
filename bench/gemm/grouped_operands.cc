#include "gemm/grouped_operands.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "random_fill.h"
#include "tessera/core/dtype.h"

namespace tessera::bench {

TensorView MxOperand::data_view(int64_t groups, int64_t rows_per_group) const {
  const DType type = fp4 ? DType::kI8 : DType::kF8E4M3;
  return TensorView(data.get(), type, {groups, rows_per_group, row_bytes()});
}

TensorView MxOperand::scale_view(int64_t groups, int64_t rows_per_group) const {
  return TensorView(scale.get(), DType::kI32, {groups, rows_per_group, scale_words()});
}

void MxOperand::row_values(int64_t r, float* out) const {
  const uint8_t* row = data.get() + r * row_bytes();
  const uint8_t* exps = reinterpret_cast<const uint8_t*>(scale.get() + r * scale_words());
  for (int64_t c = 0; c < k; ++c) {
    const float sf = ue8m0_to_f32(exps[c / gran_k]);
    const float v = fp4 ? e2m1_to_f32(uint8_t(row[c / 2] >> (4 * (c % 2)))) : e4m3_to_f32(row[c]);
    out[c] = v * sf;
  }
}

MxOperand random_mx_operand(int64_t rows, int64_t k, bool fp4, int64_t gran_k, uint64_t seed) {
  MxOperand op;
  op.fp4 = fp4;
  op.rows = rows;
  op.k = k;
  op.gran_k = gran_k;
  op.data = aligned_array<uint8_t>(size_t(op.data_bytes()));
  op.scale = aligned_array<int32_t>(size_t(rows * op.scale_words()));
  std::memset(op.scale.get(), 0, size_t(op.scale_bytes()));
  const float max_code = fp4 ? 6.0f : 448.0f;
  for_random_normal_blocks(rows, k, 16, seed, [&](int64_t r0, int64_t nr, const float* v) {
    for (int64_t r = 0; r < nr; ++r) {
      const float* x = v + r * k;
      uint8_t* row = op.data.get() + (r0 + r) * op.row_bytes();
      uint8_t* exps = reinterpret_cast<uint8_t*>(op.scale.get() + (r0 + r) * op.scale_words());
      if (fp4) std::memset(row, 0, size_t(op.row_bytes()));
      for (int64_t b = 0; b < op.sf_k(); ++b) {
        const int64_t c0 = b * gran_k, c1 = std::min(k, c0 + gran_k);
        float amax = 0;
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[c]));
        const uint8_t e = f32_to_ue8m0_ceil(std::max(amax, 1e-4f) / max_code);
        exps[b] = e;
        const float inv = 1.0f / ue8m0_to_f32(e);
        for (int64_t c = c0; c < c1; ++c) {
          if (fp4) {
            row[c / 2] |= uint8_t(f32_to_e2m1_deepgemm(x[c] * inv) << (4 * (c % 2)));
          } else {
            row[c] = f32_to_e4m3_sat(x[c] * inv);
          }
        }
      }
    }
  });
  return op;
}

MxOperand clone_mx_operand(const MxOperand& src) {
  MxOperand op;
  op.fp4 = src.fp4;
  op.rows = src.rows;
  op.k = src.k;
  op.gran_k = src.gran_k;
  op.data = aligned_array<uint8_t>(size_t(src.data_bytes()));
  op.scale = aligned_array<int32_t>(size_t(src.rows * src.scale_words()));
  std::memcpy(op.data.get(), src.data.get(), size_t(src.data_bytes()));
  std::memcpy(op.scale.get(), src.scale.get(), size_t(src.scale_bytes()));
  return op;
}

}  // namespace tessera::bench
