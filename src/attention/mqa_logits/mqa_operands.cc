#include "attention/mqa_logits/mqa_operands.h"

#include <cmath>
#include <cstring>

#include "tessera/core/cpu.h"
#include "tessera/core/dtype.h"

namespace tessera::attention::detail {
namespace {

// 2^(e - 127) for a UE8M0 byte (0xFF is NaN).
float ue8m0_scale(uint32_t word, int block) {
  return ue8m0_to_f32(uint8_t(word >> (8 * block)));
}

// One element of a query or key row, MX scale folded in, as bf16 bits. e4m3/e2m1 values times a power
// of two are exact in bf16 unless the product leaves bf16's range (then it rounds like f32_to_bf16).
uint16_t element_bf16(const uint8_t* row, int d, bool fp4, int64_t stride_d, float scale) {
  float v;
  if (fp4) {
    const uint8_t byte = row[d / 2];
    v = e2m1_to_f32(d % 2 ? uint8_t(byte >> 4) : uint8_t(byte & 0xF));
  } else {
    v = e4m3_to_f32(row[d * stride_d]);
  }
  return f32_to_bf16(v * scale);
}

}  // namespace

void build_query_panel(const QuerySource& q, int64_t i, uint16_t* panel, float* weights) {
  const int nv = q.head_vectors(), hp = 16 * nv;
  std::memset(panel, 0, size_t(q.panel_elems()) * 2);
  const uint8_t* base = q.data + (i / q.inner) * q.stride_outer + (i % q.inner) * q.stride_inner;
  const bool plain_rows = !q.fp4 && !q.sf && q.stride_d == 1;  // FP8 rows: the vector converter, then pairs
  uint16_t row_bf16[256];
  for (int h = 0; h < q.heads; ++h) {
    const uint8_t* row = base + h * q.stride_head;
    if (plain_rows) {
      mqa_kernels().e4m3_to_bf16(row, q.dim, row_bf16);
      for (int d = 0; d < q.dim; ++d) panel[(d / 2) * (2 * hp) + h * 2 + d % 2] = row_bf16[d];
      continue;
    }
    uint32_t word = 0;
    if (q.sf) {
      const int32_t* w = q.sf + (i / q.inner) * q.sf_outer + (i % q.inner) * q.sf_inner + h * q.sf_head;
      std::memcpy(&word, w, 4);
    }
    for (int d = 0; d < q.dim; ++d) {
      const float scale = q.sf ? ue8m0_scale(word, d / 32) : 1.0f;
      panel[(d / 2) * (2 * hp) + h * 2 + d % 2] = element_bf16(row, d, q.fp4, q.stride_d, scale);
    }
  }
  for (int h = 0; h < hp; ++h) {
    float w = 0;
    if (h < q.heads) {
      if (q.weights_bf16) {
        uint16_t b;
        std::memcpy(&b, static_cast<const uint16_t*>(q.weights) + i * q.w_stride + h, 2);
        w = bf16_to_f32(b);
      } else {
        w = static_cast<const float*>(q.weights)[i * q.w_stride + h];
      }
    }
    weights[h] = w;
  }
}

void convert_key_rows(const KeyFormat& f, const uint8_t* values, int64_t values_stride, const uint8_t* scales,
                      int64_t scales_stride, int rows, uint16_t* dst, float* scale_dst) {
  if (!f.mx) {
    const cpu::E4m3ToBf16Fn convert = mqa_kernels().e4m3_to_bf16;
    if (values_stride == f.dim) {  // contiguous rows (paged pages, packed kv): one call
      convert(values, int64_t(rows) * f.dim, dst);
    } else {
      for (int r = 0; r < rows; ++r) convert(values + r * values_stride, f.dim, dst + int64_t(r) * f.dim);
    }
    for (int r = 0; r < rows; ++r) std::memcpy(scale_dst + r, scales + r * scales_stride, 4);
    return;
  }
  for (int r = 0; r < rows; ++r) {
    uint32_t word;
    std::memcpy(&word, scales + r * scales_stride, 4);
    const uint8_t* row = values + r * values_stride;
    for (int d = 0; d < f.dim; ++d)
      dst[int64_t(r) * f.dim + d] = element_bf16(row, d, f.fp4, 1, ue8m0_scale(word, d / 32));
    scale_dst[r] = 1.0f;
  }
}

MqaKernels mqa_kernels() {
  if (int(active_isa()) >= int(Isa::kAvx512Bf16)) {
    const cpu::MqaRowsFn rows = cpu::mqa_rows_avx512bf16();
    const cpu::E4m3ToBf16Fn convert = cpu::e4m3_to_bf16_avx512bf16();
    if (rows && convert) return {rows, convert};
  }
  return {mqa_rows_scalar, e4m3_to_bf16_scalar};
}

void mqa_rows_scalar(const cpu::MqaRowsArgs& a) {
  const int hp = 16 * a.head_vectors;
  for (int r = 0; r < a.rows; ++r) {
    const uint16_t* k = a.k + r * a.k_stride;
    float sum = 0;
    for (int h = 0; h < a.heads; ++h) {
      float dot = 0;
      for (int d = 0; d < a.dim; ++d)
        dot += bf16_to_f32(a.q_panel[(d / 2) * (2 * hp) + h * 2 + d % 2]) * bf16_to_f32(k[d]);
      const float x = dot * a.k_scale[r];
      sum += (0.0f > x ? 0.0f : x) * a.weights[h];
    }
    a.out[r] = sum;
  }
}

void e4m3_to_bf16_scalar(const uint8_t* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(e4m3_to_f32(src[i]));
}

}  // namespace tessera::attention::detail
