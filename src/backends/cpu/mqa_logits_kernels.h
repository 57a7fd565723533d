// Plain interface between the MQA-logits drivers (src/attention/mqa_logits) and their per-ISA kernels.
// No inline functions or templates here: ISA translation units include this file (see README.md).
#pragma once

#include <cstdint>

namespace tessera::cpu {

// Logits of one query against `rows` key rows:
//   out[r] = sum_{h < heads} weights[h] * relu(k_scale[r] * sum_{d < dim} q(h, d) * k[r][d])
// q_panel: the query in bf16, "pair-interleaved by head": element (h, d) at
//   q_panel[(d / 2) * (32 * head_vectors) + h * 2 + d % 2], heads >= `heads` up to 16 * head_vectors zero.
// weights: 16 * head_vectors floats (entries >= heads are ignored).
// k: bf16 rows of `dim` values, row stride k_stride elements; k_scale: one float per row.
// relu(x) = (0 > x) ? 0 : x (NaN passes through). Heads are summed in a fixed order that does not
// depend on `rows`, so a row's result is the same whichever block it is computed in.
struct MqaRowsArgs {
  const uint16_t* q_panel;
  const float* weights;
  int heads;         // 1..128
  int head_vectors;  // ceil(heads / 16)
  int dim;           // even
  const uint16_t* k;
  int64_t k_stride;
  const float* k_scale;
  int rows;
  float* out;
};
using MqaRowsFn = void (*)(const MqaRowsArgs& args);

// float8_e4m3fn bytes -> bf16 bits (exact), n values.
using E4m3ToBf16Fn = void (*)(const uint8_t* src, int64_t n, uint16_t* dst);

// nullptr when the library was built without AVX512_BF16 kernels.
MqaRowsFn mqa_rows_avx512bf16();
E4m3ToBf16Fn e4m3_to_bf16_avx512bf16();

}  // namespace tessera::cpu
