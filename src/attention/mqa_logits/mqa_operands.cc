#include "attention/mqa_logits/mqa_operands.h"

#include <cmath>
#include <cstring>

#include "backends/cpu/registry.h"
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

void build_query_panel(const cpu::MqaLogitsKernels& k, const QuerySource& q, int64_t i, void* panel, float* weights) {
  const uint8_t* base = q.data + (i / q.inner) * q.stride_outer + (i % q.inner) * q.stride_inner;
  const bool plain_rows = !q.fp4 && !q.sf && q.stride_d == 1;  // FP8 rows: the vector converter
  uint16_t rows_bf16[128 * 128];                               // heads x dim, both <= 128
  for (int h = 0; h < q.heads; ++h) {
    const uint8_t* row = base + h * q.stride_head;
    uint16_t* dst = rows_bf16 + h * q.dim;
    if (plain_rows) {
      k.e4m3_to_bf16(row, q.dim, dst);
      continue;
    }
    uint32_t word = 0x7F7F7F7Fu;  // without scale factors: 2^0 for every block
    if (q.sf) {
      const int32_t* w = q.sf + (i / q.inner) * q.sf_outer + (i % q.inner) * q.sf_inner + h * q.sf_head;
      std::memcpy(&word, w, 4);
    }
    if (q.stride_d == 1) {  // the set's MX conversion: bf16 rows (the same bits), or fp32 products to round
      uint8_t scales[4];
      std::memcpy(scales, &word, 4);
      if (k.key_bytes == 2) {
        k.mx_keys({row, 0, scales, 0, 1, q.dim, q.fp4, dst});
      } else {
        float products[128];
        k.mx_keys({row, 0, scales, 0, 1, q.dim, q.fp4, products});
        for (int d = 0; d < q.dim; ++d) dst[d] = f32_to_bf16(products[d]);
      }
      continue;
    }
    for (int d = 0; d < q.dim; ++d)
      dst[d] = element_bf16(row, d, q.fp4, q.stride_d, q.sf ? ue8m0_scale(word, d / 32) : 1.0f);
  }
  k.pack_query(rows_bf16, q.heads, q.dim, panel);
  for (int h = 0; h < q.weight_elems(); ++h) {
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

void convert_key_rows(const cpu::MqaLogitsKernels& k, const KeyFormat& f, const uint8_t* values, int64_t values_stride,
                      const uint8_t* scales, int64_t scales_stride, int rows, void* dst, float* scale_dst) {
  if (!f.mx) {
    char* out = static_cast<char*>(dst);
    if (values_stride == f.dim) {  // contiguous rows (paged pages, packed kv): one call
      k.e4m3_keys(values, int64_t(rows) * f.dim, out);
    } else {
      for (int r = 0; r < rows; ++r)
        k.e4m3_keys(values + r * values_stride, f.dim, out + int64_t(r) * f.dim * k.key_bytes);
    }
    for (int r = 0; r < rows; ++r) std::memcpy(scale_dst + r, scales + r * scales_stride, 4);
    return;
  }
  k.mx_keys({values, values_stride, scales, scales_stride, rows, f.dim, f.fp4, dst});
  for (int r = 0; r < rows; ++r) scale_dst[r] = 1.0f;
}

const cpu::MqaLogitsKernels& mqa_kernels(const char* caller) {
  return cpu::kernels_for<cpu::MqaLogitsKernels>(cpu::Slot::kMqaLogits, caller);
}

}  // namespace tessera::attention::detail
