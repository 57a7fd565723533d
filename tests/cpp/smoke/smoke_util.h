// Helpers of the dispatch smoke suite: random bf16 / e4m3 operands with their float values, and a
// comparison of a result against a float64 reference with a tolerance relative to the reference's size.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "test_util.h"

namespace tessera::test::smoke {

inline std::vector<uint16_t> random_bf16(Rng& rng, int64_t n, std::vector<double>* values) {
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  values->resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    bits[size_t(i)] = f32_to_bf16(float(rng.normal()));
    (*values)[size_t(i)] = bf16_to_f32(bits[size_t(i)]);
  }
  return bits;
}

inline std::vector<uint8_t> random_e4m3(Rng& rng, int64_t n, std::vector<double>* values) {
  std::vector<uint8_t> bits(static_cast<size_t>(n));
  values->resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    bits[size_t(i)] = f32_to_e4m3_sat(float(rng.normal() * 4));
    (*values)[size_t(i)] = e4m3_to_f32(bits[size_t(i)]);
  }
  return bits;
}

// Every got[i] within rel * (largest |ref|) of ref[i]: a wrong kernel (or a wrong dispatch) misses by far
// more, while the kernels' bf16 / fp32 roundings stay well inside.
inline ::testing::AssertionResult close_to(const std::string& what, const std::vector<double>& got,
                                           const std::vector<double>& ref, double rel) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << what << ": size differs";
  double scale = 1e-30;
  for (double r : ref) scale = std::fmax(scale, std::fabs(r));
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::fabs(got[i] - ref[i]) <= rel * scale))
      return ::testing::AssertionFailure() << what << ": element " << i << " is " << got[i] << ", want " << ref[i]
                                           << " (tolerance " << rel * scale << ")";
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::test::smoke
