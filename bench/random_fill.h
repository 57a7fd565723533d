// Random near-normal data for benchmarks (never zeros: some hardware and libraries are faster on them).
// Deterministic for a seed whatever the thread count: each block of rows has its own generator.
#pragma once

#include <cstdint>
#include <functional>

namespace tessera::bench {

// Calls fill(row0, rows, values) for consecutive blocks of `block_rows` rows of a rows x cols matrix,
// in parallel over the pool; `values` holds rows*cols near-standard-normal floats for that block
// (mean 0, variance 1, |x| < 3.47).
void for_random_normal_blocks(int64_t rows, int64_t cols, int64_t block_rows, uint64_t seed,
                              const std::function<void(int64_t row0, int64_t rows, const float* values)>& fill);

}  // namespace tessera::bench
