// Argument checks and input normalisation shared by the ElasticBuffer and Buffer dispatches.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::ep::detail {

struct TokenInput {
  bool fp8 = false;
  int64_t tokens = 0, hidden = 0, hidden_bytes = 0, packs = 0;
};

inline bool given(const TensorView& t) {
  return t.data != nullptr || t.ndim != 0;
}

// x: bf16 or float8_e4m3fn [T, hidden] with contiguous rows of a multiple of 16 bytes; FP8 needs sf
// [T, packs] of 4-byte items (float32 or int32), any strides; bf16 must come without sf.
TokenInput check_tokens(const char* fn, const TensorView& x, const TensorView& sf);
// The scale packs of every token made contiguous ([T][packs] 4-byte items).
std::vector<char> contiguous_packs(const TensorView& sf, int64_t tokens, int64_t packs);
// A float32 [rows, cols] view (any strides) copied row-major; checks dtype and shape first.
std::vector<float> contiguous_f32(const char* fn, const char* arg, const TensorView& t, int64_t rows, int64_t cols);
// The packs as contiguous [T][packs] items: sf's own memory when it already is, else a copy in *storage.
const char* packs_rows(const TensorView& sf, int64_t tokens, int64_t packs, std::vector<char>* storage);
// The same for a float32 [rows, cols] argument (checked like contiguous_f32).
const float* f32_rows(const char* fn, const char* arg, const TensorView& t, int64_t rows, int64_t cols,
                      std::vector<float>* storage);

}  // namespace tessera::ep::detail
