// The top-k benchmark's peer and result check.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::bench {

// One batch of rows as the benchmark stores them: contiguous rows of bf16 or fp32 bits.
struct SelectBatch {
  const void* data;
  bool bf16;
  int64_t rows, cols;
};

// The peer: per row, (value, index) pairs, std::nth_element for the k largest, std::sort of those
// k by value - the obvious standard-library top-k - run over the rows on tessera's thread pool.
// Writes indices (int32, rows x k) in descending value order.
void std_topk(const SelectBatch& batch, int k, int32_t* indices);

// Verifies a top-k result: per row, k distinct in-range indices, and every element greater than the
// smallest selected value is selected (min(selected) >= max(unselected)). values (may be null) must
// be bitwise copies. Returns an empty string or the first problem found.
std::string check_topk_result(const SelectBatch& batch, int k, const int32_t* indices, const void* values);

}  // namespace tessera::bench
