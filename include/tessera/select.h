// tessera/select.h - DeepSelect's top-k on the CPU (DeepSelect's API, docs/attention.md).
//
// topk() picks, per row of `input` [b, V] (bfloat16 or float32, stride(1) == 1, any row stride), the
// `topk` largest elements of the row's range [begin[i], end[i]) (defaults 0 and V) and writes their
// positions (column indices into the row) and values.
//
// Contract (the anchor's, plus the choices tessera makes where the anchor is silent):
//  - Order: elements are ranked by value; -0.0 ranks just below +0.0; among equal values the lower
//    index ranks higher. The selected set is exactly the first `topk` of that total order, so it is
//    unique: the same on every run, thread count and instruction set. Consequently
//    min(selected) >= max(unselected) and the indices are distinct.
//  - Values are bitwise copies of input[row, index].
//  - Output order: sorted = descending rank (value, then ascending index); sorted_index = ascending
//    index; neither = unspecified by the contract (tessera happens to write ascending indices).
//    sorted and sorted_index together are an error (as in DeepSelect). sorted works for bf16 too
//    (DeepSelect's CUDA backend allows it for fp32 only).
//  - Short rows (len = end - begin <= topk): the len valid entries come first (in the requested
//    order), then idx_oob_fill_value / value_oob_fill_value. Short rows are never NaN-checked (their
//    NaNs are returned like any value), as on DeepSelect's CUDA backend.
//  - output_idx_offset[i] (int32) is added to every real index of row i (not to the fill index); the
//    sum is computed in int64 and then stored in the index type (int32 wraps modulo 2^32).
//  - NaN in a row with len > topk: abort_when_nan_found = true (DeepSelect traps the GPU kernel):
//    every row without NaN is written, rows with NaN are left untouched, then Error(kInvalidArgument)
//    names the first NaN row. abort_when_nan_found = false marks the row instead: every index of the row becomes
//    kNanRowMarker (0x3F3F3F3F, not offset) and every value a quiet NaN (DeepSelect's CUDA backend sets only index
//    [0]).
//  - begin (which DeepSelect documents but does not support yet) is implemented: the row range is
//    [begin[i], end[i]) and indices stay absolute column positions.
//  - Limits: 1 <= topk <= kMaxTopk (4096, DeepSelect's limit); V < 2^31.
// Invalid arguments throw Error(kInvalidArgument) naming the argument and the rule before any output is
// written.
//
// Algorithm (single pass over each row): a strided sample of the row gives a conservative first
// threshold; one streaming pass appends every element above the threshold to a candidate buffer with
// an AVX-512 compress (scalar path elsewhere); when the buffer fills, a radix select finds the current
// topk-th key, the buffer is compacted to exactly topk entries and the threshold rises. Long rows with
// few rows per thread are split across threads, each part keeping its own top-k, merged at the end.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>

#include "tessera/core/tensor.h"

namespace tessera::select {

constexpr int kMaxTopk = 4096;
constexpr int32_t kNanRowMarker = 0x3F3F3F3F;

struct TopkOptions {
  bool sorted = false;        // descending values (ties: ascending index)
  bool sorted_index = false;  // ascending indices
  int64_t idx_oob_fill_value = 2147483647;
  float value_oob_fill_value = -std::numeric_limits<float>::infinity();  // rounded to bf16 for bf16 input
  bool abort_when_nan_found = true;
};

// input: [b, V] bf16 | fp32, stride(1) == 1.
// begin, end: optional int32 [b] (nullptr = 0 / V), 0 <= begin[i] <= end[i] <= V.
// output_val: optional [b, topk] with input's dtype (nullptr = values not returned), stride(1) == 1.
// output_idx: [b, topk] int32 | int64, stride(1) == 1.
// output_idx_offset: optional int32 [b].
// Outputs must not overlap each other or the inputs.
void topk(const TensorView& input, int topk, const TensorView* begin, const TensorView* end,
          const TensorView* output_val, const TensorView& output_idx, const TensorView* output_idx_offset,
          const TopkOptions& options = {});

// (input row stride, output row stride) alignments in bytes that DeepSelect's GPU kernels require:
// (1024, 32). tessera accepts any row stride; the values are returned so code that pads its buffers
// to them keeps working.
std::pair<int, int> get_stride_requirement();

}  // namespace tessera::select
