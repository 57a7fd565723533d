// abs_max16 (the generic quantisers' block amax) against the plain std::max loop, NaN and signed
// zeros included.
#include "core/abs_max.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tessera/core/dtype.h"

namespace tessera {
namespace {

TEST(AbsMax16, EqualsTheSequentialMaxLoop) {
  std::mt19937_64 gen(60);
  std::normal_distribution<float> d(0.0f, 10.0f);
  for (const int64_t n : {16, 64, 128, 592}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = d(gen);
      if (trial % 4 == 1) x[size_t(gen() % n)] = NAN;  // never the amax
      if (trial % 4 == 2) x[size_t(gen() % n)] = -INFINITY;
      if (trial % 4 == 3) std::fill(x.begin(), x.end(), -0.0f);
      float ref = 0;
      for (const float v : x) ref = std::max(ref, std::fabs(v));
      ASSERT_EQ(f32_bits(abs_max16(x.data(), n)), f32_bits(ref)) << "n " << n << " trial " << trial;
    }
  }
}

}  // namespace
}  // namespace tessera
