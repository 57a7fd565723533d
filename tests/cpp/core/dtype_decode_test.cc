// Decoding (small format -> f32) of every encoding against the float64 model of the format definitions.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype_reference.h"
#include "tessera/core/dtype.h"
#include "test_util.h"

namespace tessera::test {
namespace {

// Checks got == expected exactly (sign of zero included); NaN only needs to be a NaN of the same sign.
::testing::AssertionResult same_value(const char* fn, uint32_t code, double expected, float got) {
  if (std::isnan(expected)) {
    if (std::isnan(got) && std::signbit(got) == std::signbit(expected)) return ::testing::AssertionSuccess();
  } else if (f32_bits(got) == f32_bits(float(expected)) && double(float(expected)) == expected) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << fn << "(" << hex(code) << "): expected " << expected << ", got " << got
                                       << " (bits " << hex(f32_bits(got)) << ")";
}

TEST(DtypeDecode, Bf16AllEncodings) {
  for (uint32_t c = 0; c < 0x10000; ++c)
    ASSERT_TRUE(same_value("bf16_to_f32", c, decode_ref(kBf16Format, c), bf16_to_f32(uint16_t(c))));
}

TEST(DtypeDecode, F16AllEncodings) {
  for (uint32_t c = 0; c < 0x10000; ++c)
    ASSERT_TRUE(same_value("f16_to_f32", c, decode_ref(kF16Format, c), f16_to_f32(uint16_t(c))));
}

TEST(DtypeDecode, E4m3AllEncodings) {
  for (uint32_t c = 0; c < 0x100; ++c)
    ASSERT_TRUE(same_value("e4m3_to_f32", c, decode_ref(kE4m3Format, c), e4m3_to_f32(uint8_t(c))));
  // Spot values stated by the format: largest finite 448, NaN only at S.1111.111, no inf.
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
}

TEST(DtypeDecode, E5m2AllEncodings) {
  for (uint32_t c = 0; c < 0x100; ++c)
    ASSERT_TRUE(same_value("e5m2_to_f32", c, decode_ref(kE5m2Format, c), e5m2_to_f32(uint8_t(c))));
  EXPECT_EQ(e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_TRUE(std::isinf(e5m2_to_f32(0x7C)));
  EXPECT_EQ(e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
}

TEST(DtypeDecode, E2m1AllNibbles) {
  const float kExpected[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint32_t c = 0; c < 16; ++c) {
    ASSERT_TRUE(same_value("e2m1_to_f32", c, decode_ref(kE2m1Format, c), e2m1_to_f32(uint8_t(c))));
    EXPECT_EQ(std::fabs(e2m1_to_f32(uint8_t(c))), kExpected[c & 7]);
  }
  // Only the low nibble is an element: the high nibble of the argument is ignored.
  for (uint32_t c = 0; c < 256; ++c)
    ASSERT_EQ(f32_bits(e2m1_to_f32(uint8_t(c))), f32_bits(e2m1_to_f32(uint8_t(c & 0xF)))) << hex(c);
}

TEST(DtypeDecode, Ue8m0AllEncodings) {
  for (uint32_t c = 0; c < 0x100; ++c)
    ASSERT_TRUE(same_value("ue8m0_to_f32", c, decode_ue8m0_ref(c), ue8m0_to_f32(uint8_t(c))));
  EXPECT_EQ(ue8m0_to_f32(127), 1.0f);
  EXPECT_EQ(ue8m0_to_f32(0), std::ldexp(1.0f, -127));  // an f32 subnormal, still exact
}

TEST(DtypeDecode, ReferenceModelKnownValues) {
  // The model itself against values written down from the format tables (OCP 8-bit spec, MX spec).
  EXPECT_EQ(decode_ref(kE4m3Format, 0x38), 1.0);
  EXPECT_EQ(decode_ref(kE4m3Format, 0x08), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(decode_ref(kE4m3Format, 0x07), 7 * std::ldexp(1.0, -9));
  EXPECT_EQ(decode_ref(kE5m2Format, 0x3C), 1.0);
  EXPECT_EQ(decode_ref(kE2m1Format, 0x7), 6.0);
  EXPECT_EQ(decode_ref(kE2m1Format, 0xD), -3.0);
  EXPECT_EQ(decode_ref(kBf16Format, 0x3F80), 1.0);
  EXPECT_EQ(decode_ref(kBf16Format, 0x7F7F), (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127));
  EXPECT_EQ(decode_ref(kF16Format, 0x7BFF), 65504.0);
  EXPECT_EQ(decode_ref(kF16Format, 0x0001), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::signbit(decode_ref(kE2m1Format, 0x8)));
}

}  // namespace
}  // namespace tessera::test
