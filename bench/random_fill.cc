#include "random_fill.h"

#include <algorithm>
#include <cmath>
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

// Box-Muller: two independent standard normals from two uniforms in (0, 1].
void normal_pair(uint64_t* state, float* x, float* y) {
  const double u1 = (double(splitmix64(state) >> 11) + 1.0) * 0x1p-53;
  const double u2 = double(splitmix64(state) >> 11) * 0x1p-53;
  const double r = std::sqrt(-2.0 * std::log(u1)), phi = 6.283185307179586 * u2;
  *x = float(r * std::cos(phi));
  *y = float(r * std::sin(phi));
}

}  // namespace

void for_random_normal_blocks(int64_t rows, int64_t cols, int64_t block_rows, uint64_t seed,
                              const std::function<void(int64_t, int64_t, const float*)>& fill) {
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    std::vector<float> values;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * block_rows, nr = std::min(block_rows, rows - r0);
      values.resize(size_t(nr * cols) + 1);
      uint64_t state = seed * 0x2545F4914F6CDD1Dull + uint64_t(b);
      for (int64_t i = 0; i < nr * cols; i += 2) normal_pair(&state, &values[size_t(i)], &values[size_t(i) + 1]);
      fill(r0, nr, values.data());
    }
  });
}

}  // namespace tessera::bench
