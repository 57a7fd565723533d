// Plain interface between the MQA-logits drivers (src/attention/mqa_logits) and their per-ISA kernels.
// No inline functions or templates here: ISA translation units include this file (see README.md).
//
// A kernel set reads query panels and key tiles in its own element type (`key_bytes`): bf16 for the
// vdpbf16ps kernel and the scalar reference, fp32 for the fp32-FMA (Highway) kernels. The driver builds
// each query's heads as bf16 rows (exact for FP8; MX scales folded in and rounded to bf16), packs them
// with pack_query, converts key rows with e4m3_keys / mx_keys into tiles of `dim` elements per row, and
// runs `rows` for each query over the tile rows it sees.
#pragma once

#include <stdint.h>

#include "tessera/core/cpu.h"

namespace tessera::cpu {

// Logits of one query against `rows` key rows:
//   out[r] = sum_{h < heads} weights[h] * relu(k_scale[r] * sum_{d < dim} q(h, d) * k[r][d])
// with q(h, d) and k[r][d] the values of the panel and tile elements, dot products accumulated in fp32.
// q_panel: from the set's pack_query. weights: 16 * head_vectors floats (entries >= heads are ignored).
// k: rows of `dim` elements of the set's type, row stride k_stride elements; k_scale: one float per row.
// relu(x) = (0 > x) ? 0 : x (NaN passes through). Heads are summed in a fixed order that does not
// depend on `rows`, so a row's result is the same whichever block it is computed in.
struct MqaRowsArgs {
  const void* q_panel;
  const float* weights;
  int heads;         // 1..128
  int head_vectors;  // ceil(heads / 16)
  int dim;           // even
  const void* k;
  int64_t k_stride;
  const float* k_scale;
  int rows;
  float* out;
  // Optional: bytes the caller reads next (a paged cache's next page) for a set with rows_prefetch to
  // prefetch, spread over its work; nullptr for none.
  const void* prefetch = nullptr;
  int64_t prefetch_bytes = 0;
};
using MqaRowsFn = void (*)(const MqaRowsArgs& args);

// float8_e4m3fn bytes -> bf16 bits (exact), n values.
using E4m3ToBf16Fn = void (*)(const uint8_t* src, int64_t n, uint16_t* dst);

// MX key rows: FP8 (one byte per value) or FP4 (two per byte, low nibble = even d) values of row r at
// values + r * values_stride, the row's int32 word of four UE8M0 exponents (one per 32 values, low byte
// first) at scales + r * scales_stride. Output: `rows` rows of `dim` elements of the set's type
// (row stride dim), value * 2^(e - 127) (bf16 sets round the product to bf16).
struct MqaMxKeyArgs {
  const uint8_t* values;
  int64_t values_stride;
  const uint8_t* scales;
  int64_t scales_stride;
  int rows, dim;
  bool fp4;
  void* dst;
};

struct MqaLogitsKernels {
  const char* name;
  int key_bytes;  // bytes of one panel or tile element: 2 (bf16) or 4 (fp32)
  // Bytes of one packed query panel (a multiple of 64).
  int64_t (*panel_bytes)(int heads, int dim);
  // q_bf16: `heads` rows of `dim` bf16 values (row stride dim) -> the panel the set's rows kernel reads.
  void (*pack_query)(const uint16_t* q_bf16, int heads, int dim, void* panel);
  E4m3ToBf16Fn e4m3_to_bf16;  // query rows
  // float8_e4m3fn bytes -> n tile elements (exact).
  void (*e4m3_keys)(const uint8_t* src, int64_t n, void* dst);
  void (*mx_keys)(const MqaMxKeyArgs& args);
  MqaRowsFn rows;
  // Key rows the prefill driver converts and hands to `rows` at a time: a multiple of the kernel's
  // row blocks; the tile and one query panel stay in L1 or close.
  int tile_rows = 72;
  // Queries the prefill driver runs over each converted tile (the conversion is shared by them).
  int query_block = 4;
  // Whether `rows` prefetches MqaRowsArgs::prefetch itself; if not, the paged driver prefetches the
  // next page in one go before converting a page.
  bool rows_prefetch = false;
};

// The bf16 sets. The scalar one is the reference; its panel layout ("pair-interleaved by head",
// element (h, d) at panel[(d / 2) * (32 * head_vectors) + h * 2 + d % 2], zero for h >= heads) is the
// one the vdpbf16ps kernel reads, and both share its pack_query and panel_bytes.
const MqaLogitsKernels* mqa_kernels_scalar();
const MqaLogitsKernels* mqa_kernels_avx512bf16();  // nullptr when built without that level
// The vdpbf16ps set's MX key conversion (avx512bf16/mqa_mx_keys.cc; the AMX set shares it): the scalar
// set's bits, by table lookups and exponent adds.
void mqa_mx_keys_avx512bf16(const MqaMxKeyArgs& args);
// The AMX set (amx/mqa_logits_amx.cc): the bf16 panel layout (its own pack_query), the vdpbf16ps
// set's MX key conversion, its own FP8 one (same bits), rows by tdpbf16ps (with rows_prefetch).
const MqaLogitsKernels* mqa_kernels_amx();
// The BFDOT set of the neon_bf16 level (neon_bf16/mqa_logits_bfdot.cc): the bf16 panel layout and MX
// keys, its own rows and FP8 conversion; nullptr on CPUs other than AArch64.
const MqaLogitsKernels* mqa_kernels_neon_bf16();
int64_t mqa_panel_bytes_bf16(int heads, int dim);
void mqa_pack_query_bf16(const uint16_t* q_bf16, int heads, int dim, void* panel);
void mqa_mx_keys_bf16(const MqaMxKeyArgs& args);

// The fp32 sets written with Highway (hwy/mqa_logits.cc) for `level`, nullptr when none was built.
// Panel: element (h, d) as fp32 at panel[d * 16 * head_vectors + h], zero for h >= heads.
const MqaLogitsKernels* mqa_kernels_hwy(Isa level);

}  // namespace tessera::cpu
