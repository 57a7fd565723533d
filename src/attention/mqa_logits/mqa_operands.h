// The operands of the MQA-logits drivers after validation: queries (FP8 or MX FP8/FP4 with weights),
// key rows (FP8 + fp32 token scale, or MX FP8/FP4 + UE8M0 words), and their conversion to the bf16
// layouts the kernels read (backends/cpu/mqa_logits_kernels.h).
#pragma once

#include <cstdint>

#include "backends/cpu/mqa_logits_kernels.h"

namespace tessera::attention::detail {

// Query i lives at data + (i / inner) * stride_outer + (i % inner) * stride_inner (bytes); prefill
// has inner = 1, paged decode inner = next_n. Element (h, d) at + h * stride_head + d * stride_d
// (FP4: byte d / 2, stride_d must be 1, low nibble = even d).
struct QuerySource {
  const uint8_t* data;
  int64_t stride_outer, stride_inner, stride_head, stride_d;
  int64_t inner;
  bool fp4;
  const int32_t* sf;  // MX scales: int32 word of (i, h) at sf_outer, sf_inner, sf_head strides; nullptr = FP8
  int64_t sf_outer, sf_inner, sf_head;
  const void* weights;  // [queries, heads] float32 or bf16, row stride w_stride elements
  bool weights_bf16;
  int64_t w_stride;
  int heads, dim;

  int head_vectors() const { return (heads + 15) / 16; }
  // Floats of one query's padded weights.
  int64_t weight_elems() const { return 16 * head_vectors(); }
};

// Builds query i's panel in the layout of kernel set `k` and its weights (zero beyond `heads`).
void build_query_panel(const cpu::MqaLogitsKernels& k, const QuerySource& q, int64_t i, void* panel, float* weights);

// Key rows: FP8 values with one fp32 scale per row, or (mx) FP8/FP4 values with one int32 word of four
// UE8M0 exponents per row.
struct KeyFormat {
  bool fp4, mx;
  int dim;
  int row_bytes() const { return fp4 ? dim / 2 : dim; }
};

// Converts `rows` rows: values at values + r * values_stride (bytes), the row's scale (fp32, or an
// int32 UE8M0 word) at scales + r * scales_stride. Output: rows of set `k`'s element type (stride dim)
// with the MX exponents folded in, and fp32 per-row scales (1.0 for MX).
void convert_key_rows(const cpu::MqaLogitsKernels& k, const KeyFormat& f, const uint8_t* values, int64_t values_stride,
                      const uint8_t* scales, int64_t scales_stride, int rows, void* dst, float* scale_dst);

// The kernel set for the active instruction set, from the kernel registry (`caller` names the
// operation in TESSERA_VERBOSE_DISPATCH lines). One call uses one set throughout.
const cpu::MqaLogitsKernels& mqa_kernels(const char* caller);

}  // namespace tessera::attention::detail
