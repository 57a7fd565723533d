// Hand-checked answers for the rounding, overflow and NaN rules (they pin the reference model too),
// round trips, and dtype names.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype_conversions.h"
#include "test_util.h"

namespace tessera::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct KnownAnswer {
  const char* conversion;
  float x;
  uint32_t expected;
};

// Worked out by hand from the format tables; each line states the rule it pins.
const KnownAnswer kKnownAnswers[] = {
    {"f32_to_e4m3", 1.0625f, 0x38},   // tie between 1 (0x38) and 1.125 (0x39): even code
    {"f32_to_e4m3", 1.1875f, 0x3A},   // tie between 1.125 and 1.25 (0x3A)
    {"f32_to_e4m3", 0x1p-10f, 0x00},  // half the smallest subnormal: tie to +0
    {"f32_to_e4m3", 0x3p-10f, 0x02},  // tie between subnormals 1 and 2
    {"f32_to_e4m3", 464.0f, 0x7E},    // tie between 448 (0x7E) and the NaN slot: even code 448
    {"f32_to_e4m3", 465.0f, 0x7F},    // beyond: overflow is NaN (non-saturating)
    {"f32_to_e4m3", -kInf, 0xFF},     // inf -> NaN with the sign
    {"f32_to_e4m3", -0.0f, 0x80},
    {"f32_to_e4m3_sat", 1e6f, 0x7E},  // saturates at 448
    {"f32_to_e4m3_sat", -kInf, 0xFE},
    {"f32_to_e4m3_sat", kNaN, 0x7F},  // NaN stays NaN
    {"f32_to_e5m2", 61439.0f, 0x7B},  // below the tie: 57344
    {"f32_to_e5m2", 61440.0f, 0x7C},  // tie between 57344 (odd code) and inf: inf
    {"f32_to_e5m2", -kNaN, 0xFE},
    {"f32_to_e5m2_sat", 1e9f, 0x7B},
    {"f32_to_e5m2_sat", kInf, 0x7B},
    {"f32_to_bf16", 1.00390625f, 0x3F80},                        // 1 + 2^-8: tie to even 1.0
    {"f32_to_bf16", 1.01171875f, 0x3F82},                        // 1 + 3*2^-8: tie to even 1 + 2^-6
    {"f32_to_bf16", std::numeric_limits<float>::max(), 0x7F80},  // rounds past the largest bf16: inf
    {"f32_to_bf16", -kNaN, 0xFFC0},
    {"f32_to_f16", 65519.0f, 0x7BFF},
    {"f32_to_f16", 65520.0f, 0x7C00},  // tie between 65504 (odd) and inf
    {"f32_to_f16", 0x1p-25f, 0x0000},  // half the smallest subnormal
    {"f32_to_f16", 0x3p-25f, 0x0002},
    {"f32_to_e2m1", 0.25f, 0x0},   // ties to even codes: 0 | .5 -> 0
    {"f32_to_e2m1", 0.75f, 0x2},   // .5 | 1 -> 1
    {"f32_to_e2m1", 1.25f, 0x2},   // 1 | 1.5 -> 1
    {"f32_to_e2m1", 1.75f, 0x4},   // 1.5 | 2 -> 2
    {"f32_to_e2m1", 2.5f, 0x4},    // 2 | 3 -> 2
    {"f32_to_e2m1", 3.5f, 0x6},    // 3 | 4 -> 4
    {"f32_to_e2m1", 5.0f, 0x6},    // 4 | 6 -> 4
    {"f32_to_e2m1", 100.0f, 0x7},  // saturating
    {"f32_to_e2m1", -kInf, 0xF},
    {"f32_to_e2m1", -0.1f, 0x8},           // keeps the sign: negative zero
    {"f32_to_e2m1", kNaN, 0x0},            // documented choice: +0
    {"f32_to_e2m1_deepgemm", 0.25f, 0x0},  // ties toward the smaller magnitude
    {"f32_to_e2m1_deepgemm", 0.75f, 0x1},
    {"f32_to_e2m1_deepgemm", 1.25f, 0x2},
    {"f32_to_e2m1_deepgemm", 1.75f, 0x3},
    {"f32_to_e2m1_deepgemm", 2.5f, 0x4},
    {"f32_to_e2m1_deepgemm", 3.5f, 0x5},
    {"f32_to_e2m1_deepgemm", 5.0f, 0x6},
    {"f32_to_e2m1_deepgemm", 5.0001f, 0x7},
    {"f32_to_e2m1_deepgemm", -0.1f, 0x0},  // no negative zero
    {"f32_to_e2m1_deepgemm", -0.26f, 0x9},
    {"f32_to_e2m1_deepgemm", kInf, 0x7},
    {"f32_to_ue8m0", 1.0f, 127},
    {"f32_to_ue8m0", 1.5f, 128},  // tie goes up
    {"f32_to_ue8m0", 1.4999999f, 127},
    {"f32_to_ue8m0", 3.0f, 129},
    {"f32_to_ue8m0", 0.0f, 0xFF},
    {"f32_to_ue8m0", -1.0f, 0xFF},
    {"f32_to_ue8m0", 0x1p127f, 254},
    {"f32_to_ue8m0", 0x1.8p127f, 0xFF},  // rounds to 2^128: NaN
    {"f32_to_ue8m0_ceil", 1.0f, 127},
    {"f32_to_ue8m0_ceil", 1.0000001f, 128},
    {"f32_to_ue8m0_ceil", -3.0f, 129},  // uses |x|
    {"f32_to_ue8m0_ceil", 0.0f, 1},     // clamped below
    {"f32_to_ue8m0_ceil", 1e-45f, 1},
    {"f32_to_ue8m0_ceil", 3e38f, 254},  // clamped above
};

TEST(DtypeRules, KnownAnswersForImplementationAndReference) {
  for (const KnownAnswer& ka : kKnownAnswers) {
    const Conversion* conv = nullptr;
    for (const Conversion& c : all_conversions())
      if (std::string(c.name) == ka.conversion) conv = &c;
    ASSERT_NE(conv, nullptr) << ka.conversion;
    EXPECT_EQ(conv->impl(ka.x), ka.expected) << ka.conversion << "(" << ka.x << ") [implementation]";
    EXPECT_EQ(conv->ref(ka.x), ka.expected) << ka.conversion << "(" << ka.x << ") [reference]";
  }
}

// encode(decode(code)) == code for every code that is not NaN (the value is representable).
TEST(DtypeRules, RoundTripEveryRepresentableValue) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const float b = bf16_to_f32(uint16_t(c));
    if (!std::isnan(b)) {
      ASSERT_EQ(f32_to_bf16(b), c) << "bf16 " << hex(c);
    }
    // f16 NaNs round trip too: the payload survives the truncation.
    ASSERT_EQ(f32_to_f16(f16_to_f32(uint16_t(c))), c) << "f16 " << hex(c);
  }
  for (uint32_t c = 0; c < 0x100; ++c) {
    const float e4 = e4m3_to_f32(uint8_t(c)), e5 = e5m2_to_f32(uint8_t(c));
    if (!std::isnan(e4)) {
      ASSERT_EQ(f32_to_e4m3(e4), c) << "e4m3 " << hex(c);
      ASSERT_EQ(f32_to_e4m3_sat(e4), c) << "e4m3_sat " << hex(c);
    }
    if (!std::isnan(e5)) {
      ASSERT_EQ(f32_to_e5m2(e5), c) << "e5m2 " << hex(c);
    }
    if (std::isfinite(e5)) {
      ASSERT_EQ(f32_to_e5m2_sat(e5), c) << "e5m2_sat " << hex(c);
    }
    if (c != 0xFF) {
      ASSERT_EQ(f32_to_ue8m0(ue8m0_to_f32(uint8_t(c))), c) << "ue8m0 " << hex(c);
    }
    if (c >= 1 && c <= 254) {
      ASSERT_EQ(f32_to_ue8m0_ceil(ue8m0_to_f32(uint8_t(c))), c) << "ue8m0_ceil " << hex(c);
    }
  }
  for (uint32_t c = 0; c < 16; ++c) {
    ASSERT_EQ(f32_to_e2m1(e2m1_to_f32(uint8_t(c))), c) << "e2m1 " << hex(c);
    ASSERT_EQ(f32_to_e2m1_deepgemm(e2m1_to_f32(uint8_t(c))), c == 0x8 ? 0u : c) << "e2m1_deepgemm " << hex(c);
  }
}

// decode(encode(x)) is a fixed point of encode, and never farther from x than the neighbouring value.
TEST(DtypeRules, EncodeOfDecodedValueIsStable) {
  Rng rng = Rng::for_current_test();
  for (int i = 0; i < 200000; ++i) {
    const float x = float(rng.normal() * std::ldexp(1.0, rng.uniform_int(-12, 12)));
    const uint8_t q4 = f32_to_e4m3(x), q5 = f32_to_e5m2(x), q2 = f32_to_e2m1(x);
    const uint16_t qb = f32_to_bf16(x), qh = f32_to_f16(x);
    if (!std::isnan(e4m3_to_f32(q4))) {
      ASSERT_EQ(f32_to_e4m3(e4m3_to_f32(q4)), q4) << x;
    }
    ASSERT_EQ(f32_to_e5m2(e5m2_to_f32(q5)), q5) << x;
    ASSERT_EQ(f32_to_e2m1(e2m1_to_f32(q2)), q2) << x;
    ASSERT_EQ(f32_to_bf16(bf16_to_f32(qb)), qb) << x;
    ASSERT_EQ(f32_to_f16(f16_to_f32(qh)), qh) << x;
    // Round to nearest: the bf16 result is within half a bf16 ulp of x.
    ASSERT_LE(std::fabs(double(bf16_to_f32(qb)) - x), 0.5 * bf16_ulp(x) * (1 + 1e-12)) << x;
  }
}

TEST(DtypeRules, NamesAndStorageBytes) {
  const DType all[] = {DType::kF32,    DType::kF64,    DType::kBF16,  DType::kF16, DType::kF8E4M3,
                       DType::kF8E5M2, DType::kF4E2M1, DType::kUE8M0, DType::kI8,  DType::kU8,
                       DType::kI32,    DType::kI64,    DType::kBool};
  const int bytes[] = {4, 8, 2, 2, 1, 1, 1, 1, 1, 1, 4, 8, 1};
  for (size_t i = 0; i < std::size(all); ++i) {
    EXPECT_EQ(dtype_from_name(dtype_name(all[i])), all[i]) << dtype_name(all[i]);
    EXPECT_EQ(dtype_storage_bytes(all[i]), bytes[i]) << dtype_name(all[i]);
  }
  EXPECT_EQ(dtype_from_name("bf16"), DType::kBF16);
  EXPECT_EQ(dtype_from_name("float8_e4m3fn"), DType::kF8E4M3);
  EXPECT_EQ(dtype_from_name("int32"), DType::kI32);
  EXPECT_TRUE(throws_invalid([] { dtype_from_name("float7"); }, {"unknown dtype", "float7"}));
}

}  // namespace
}  // namespace tessera::test
