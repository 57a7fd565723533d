// The portable MQA-logits set (bf16 panels and tiles): the reference the vector sets are tested
// against, and the bf16 pieces the vdpbf16ps set shares (panel layout, MX key conversion).
#include <cstring>

#include "backends/cpu/mqa_logits_kernels.h"
#include "tessera/core/dtype.h"

namespace tessera::cpu {
namespace {

void rows_scalar(const MqaRowsArgs& a) {
  const int hp = 16 * a.head_vectors;
  const auto* q = static_cast<const uint16_t*>(a.q_panel);
  for (int r = 0; r < a.rows; ++r) {
    const uint16_t* k = static_cast<const uint16_t*>(a.k) + r * a.k_stride;
    float sum = 0;
    for (int h = 0; h < a.heads; ++h) {
      float dot = 0;
      for (int d = 0; d < a.dim; ++d) dot += bf16_to_f32(q[(d / 2) * (2 * hp) + h * 2 + d % 2]) * bf16_to_f32(k[d]);
      const float x = dot * a.k_scale[r];
      sum += (0.0f > x ? 0.0f : x) * a.weights[h];
    }
    a.out[r] = sum;
  }
}

void e4m3_to_bf16_scalar(const uint8_t* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(e4m3_to_f32(src[i]));
}

void e4m3_keys_scalar(const uint8_t* src, int64_t n, void* dst) {
  e4m3_to_bf16_scalar(src, n, static_cast<uint16_t*>(dst));
}

const MqaLogitsKernels kScalar = {
    "mqa_scalar",     2,           mqa_panel_bytes_bf16, mqa_pack_query_bf16, e4m3_to_bf16_scalar, e4m3_keys_scalar,
    mqa_mx_keys_bf16, rows_scalar,
};

}  // namespace

int64_t mqa_panel_bytes_bf16(int heads, int dim) {
  return int64_t(dim) * 16 * ((heads + 15) / 16) * 2;
}

void mqa_pack_query_bf16(const uint16_t* q_bf16, int heads, int dim, void* panel) {
  const int hp = 16 * ((heads + 15) / 16);
  auto* p = static_cast<uint16_t*>(panel);
  std::memset(p, 0, size_t(mqa_panel_bytes_bf16(heads, dim)));
  for (int h = 0; h < heads; ++h)
    for (int d = 0; d < dim; ++d) p[(d / 2) * (2 * hp) + h * 2 + d % 2] = q_bf16[int64_t(h) * dim + d];
}

void mqa_mx_keys_bf16(const MqaMxKeyArgs& a) {
  auto* dst = static_cast<uint16_t*>(a.dst);
  for (int r = 0; r < a.rows; ++r) {
    uint32_t word;
    std::memcpy(&word, a.scales + r * a.scales_stride, 4);
    const uint8_t* row = a.values + r * a.values_stride;
    for (int d = 0; d < a.dim; ++d) {
      const float scale = ue8m0_to_f32(uint8_t(word >> (8 * (d / 32))));
      const float v =
          a.fp4 ? e2m1_to_f32(d % 2 ? uint8_t(row[d / 2] >> 4) : uint8_t(row[d / 2] & 0xF)) : e4m3_to_f32(row[d]);
      dst[int64_t(r) * a.dim + d] = f32_to_bf16(v * scale);
    }
  }
}

const MqaLogitsKernels* mqa_kernels_scalar() {
  return &kScalar;
}

}  // namespace tessera::cpu
