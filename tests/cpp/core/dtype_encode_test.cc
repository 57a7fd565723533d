// Encoding (f32 -> small format) against the float64 reference: every bf16-valued f32, every exact
// midpoint between neighbouring values of every format (and the f32 numbers next to it), and random f32.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/dtype_conversions.h"
#include "test_util.h"

namespace tessera::test {
namespace {

// Runs every input through every conversion; returns a failure listing the first mismatches.
::testing::AssertionResult all_conversions_agree(const std::vector<float>& inputs) {
  std::string failures;
  for (const Conversion& conv : all_conversions()) {
    MismatchLog log(conv.name);
    for (float x : inputs) log.check(x, conv.ref(x), conv.impl(x));
    if (log.count()) failures += "\n" + log.report();
  }
  if (failures.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures;
}

TEST(DtypeEncode, EveryBf16ValuedFloat) {
  std::vector<float> inputs;
  for (uint32_t h = 0; h < 0x10000; ++h) inputs.push_back(f32_from_bits(h << 16));
  EXPECT_TRUE(all_conversions_agree(inputs));
}

// Every exact midpoint between adjacent magnitudes of `f` (including the one between the largest
// finite value and the overflow point), the f32 neighbours on both sides, with both signs.
std::vector<float> midpoint_inputs(const FloatFormat& f) {
  const MagnitudeTable t = magnitude_table(f);
  std::vector<float> out;
  for (size_t i = 0; i + 1 < t.values.size(); ++i) {
    const double mid = 0.5 * (t.values[i] + t.values[i + 1]);
    const float m = float(mid);
    if (double(m) != mid) continue;  // not an f32 (cannot happen for these formats; checked below)
    for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, std::numeric_limits<float>::infinity())}) {
      out.push_back(x);
      out.push_back(-x);
    }
  }
  return out;
}

TEST(DtypeEncode, MidpointsRoundToEven) {
  for (const FloatFormat* f : {&kBf16Format, &kF16Format, &kE4m3Format, &kE5m2Format, &kE2m1Format}) {
    SCOPED_TRACE(f->name);
    const std::vector<float> inputs = midpoint_inputs(*f);
    // Every midpoint of these formats is an f32, so nothing was dropped: 3 inputs x 2 signs per pair.
    EXPECT_EQ(inputs.size(), 6 * (magnitude_table(*f).values.size() - 1));
    EXPECT_TRUE(all_conversions_agree(inputs));
  }
}

TEST(DtypeEncode, Ue8m0MidpointsAndPowers) {
  std::vector<float> inputs;
  for (int e = -149; e <= 127; ++e) {
    const float p = std::ldexp(1.0f, e);
    inputs.insert(inputs.end(), {p, std::nextafter(p, 0.0f), std::nextafter(p, 1e30f), -p});
    if (e >= -126) {
      const float mid = 1.5f * p;  // the tie between 2^e and 2^(e+1)
      inputs.insert(inputs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
    }
  }
  inputs.insert(inputs.end(), {0.0f, -0.0f, std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()});
  EXPECT_TRUE(all_conversions_agree(inputs));
}

TEST(DtypeEncode, RandomBitPatterns) {
  Rng rng = Rng::for_current_test();
  std::vector<float> inputs(1000000);
  for (float& x : inputs) x = f32_from_bits(rng.bits32());
  EXPECT_TRUE(all_conversions_agree(inputs));
}

// Random bit patterns rarely land in the small formats' ranges; these do: exponents 2^-30 .. 2^20.
TEST(DtypeEncode, RandomValuesInSmallFormatRanges) {
  Rng rng = Rng::for_current_test();
  std::vector<float> inputs(1000000);
  for (float& x : inputs) {
    const uint32_t sign = rng.bits32() & 0x80000000u, exp = uint32_t(127 + rng.uniform_int(-30, 20));
    // Keep few mantissa bits half of the time so exact ties and representable values are common.
    uint32_t man = rng.bits32() & 0x7FFFFFu;
    if (rng.bits32() & 1) man &= 0x7F0000u << (rng.bits32() % 4);
    x = f32_from_bits(sign | exp << 23 | (man & 0x7FFFFFu));
  }
  EXPECT_TRUE(all_conversions_agree(inputs));
}

}  // namespace
}  // namespace tessera::test
