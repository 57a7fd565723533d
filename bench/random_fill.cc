#include "random_fill.h"

#include <algorithm>
#include <vector>

#include "tessera/core/thread_pool.h"

namespace tessera::bench {
namespace {

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A near-standard-normal value from one 64-bit draw: the sum of four 16-bit uniforms, centred and scaled to
// unit variance (Irwin-Hall, |x| < 3.47), offset by half a step so it is never 0. Benchmarks need smooth,
// signed, non-zero data, not exact tails; this is ~10x cheaper than Box-Muller's log and sincos, which took
// a sixth of `tessera bench gemm`.
float near_normal(uint64_t* state) {
  const uint64_t r = splitmix64(state);
  const int64_t sum =
      int64_t(r & 0xffff) + int64_t((r >> 16) & 0xffff) + int64_t((r >> 32) & 0xffff) + int64_t(r >> 48);
  return float((double(sum - 131070) + 0.5) * (1.7320508075688772 / 65536.0));
}

}  // namespace

void for_random_normal_blocks(int64_t rows, int64_t cols, int64_t block_rows, uint64_t seed,
                              const std::function<void(int64_t, int64_t, const float*)>& fill) {
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    std::vector<float> values;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * block_rows, nr = std::min(block_rows, rows - r0);
      values.resize(size_t(nr * cols));
      uint64_t state = seed * 0x2545F4914F6CDD1Dull + uint64_t(b);
      for (int64_t i = 0; i < nr * cols; ++i) values[size_t(i)] = near_normal(&state);
      fill(r0, nr, values.data());
    }
  });
}

}  // namespace tessera::bench
