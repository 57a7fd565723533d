// The harness's checks must catch what they claim to: a result one bf16 ulp-pair off, an unwritten
// element, a write into d's padding, a bitwise difference. (A checker that passes everything would
// make every GEMM test vacuous.)
#include <gtest/gtest.h>

#include <cstring>

#include "gemm/gemm_cases.h"

namespace tessera::test {
namespace {

PreparedGemm valid_case(Rng& rng, DType d_type) {
  PreparedGemm g =
      prepare_plain(Family::kBf16, DType::kBF16, Layout::kNT, {9, 48, 64, kKm, kKm, 3, d_type, CMode::kNone}, rng);
  g.run();
  return g;
}

uint8_t* element(PreparedGemm& g, int64_t r, int64_t c) {
  return g.d.storage.data() + (r * g.d.ld + c) * dtype_storage_bytes(g.d.dtype);
}

TEST(GemmHarnessSelfTest, ValidResultPasses) {
  Rng rng = Rng::for_current_test();
  for (DType d : {kBf16, kF32}) {
    PreparedGemm g = valid_case(rng, d);
    EXPECT_TRUE(g.check());
  }
}

TEST(GemmHarnessSelfTest, DetectsAnElementTwoUlpsOff) {
  Rng rng = Rng::for_current_test();
  PreparedGemm g = valid_case(rng, kBf16);
  uint16_t h;
  std::memcpy(&h, element(g, 4, 17), 2);
  h = uint16_t(h + 2);  // two bf16 ulps away (same sign and binade for these values)
  std::memcpy(element(g, 4, 17), &h, 2);
  const auto result = g.check();
  EXPECT_FALSE(result);
  EXPECT_NE(std::string(result.message()).find("first at (4, 17)"), std::string::npos) << result.message();
}

TEST(GemmHarnessSelfTest, DetectsASmallErrorInAnF32Output) {
  Rng rng = Rng::for_current_test();
  PreparedGemm g = valid_case(rng, kF32);
  float v;
  std::memcpy(&v, element(g, 8, 47), 4);
  v += 1e-3f * (std::fabs(v) + 1);  // far below a bf16 ulp, far above fp32 accumulation error
  std::memcpy(element(g, 8, 47), &v, 4);
  EXPECT_FALSE(g.check());
}

TEST(GemmHarnessSelfTest, DetectsAnUnwrittenElement) {
  Rng rng = Rng::for_current_test();
  PreparedGemm g = valid_case(rng, kBf16);
  std::memcpy(element(g, 0, 0), &kPoisonBf16, 2);
  EXPECT_FALSE(g.check());
}

TEST(GemmHarnessSelfTest, DetectsAWriteIntoPadding) {
  Rng rng = Rng::for_current_test();
  PreparedGemm g = valid_case(rng, kF32);
  *element(g, 3, 48) ^= 1;  // first padding column of row 3
  const auto result = g.check();
  EXPECT_FALSE(result);
  EXPECT_NE(std::string(result.message()).find("outside d's view (row 3, col 48)"), std::string::npos)
      << result.message();
}

TEST(GemmHarnessSelfTest, BitwiseEqualReportsTheFirstDifference) {
  std::vector<uint8_t> x(4 * 6 * 2, 0), y = x;
  y[(2 * 6 + 5) * 2] = 1;
  y[(3 * 6 + 1) * 2] = 1;
  const auto result = bitwise_equal(x, y, 4, 6, 6, 2);
  EXPECT_FALSE(result);
  EXPECT_NE(std::string(result.message()).find("2 of 24 elements differ; first at (2, 5)"), std::string::npos)
      << result.message();
  EXPECT_TRUE(bitwise_equal(x, x, 4, 6, 6, 2));
}

TEST(GemmHarnessSelfTest, ApiMatchesAHandComputedProduct) {
  // [1 2; 3 4] . [5 6; 7 8]^T (B given as [N, K]) = [17 23; 39 53].
  Rng rng = Rng::for_current_test();
  PreparedGemm g =
      prepare_plain(Family::kBf16, DType::kBF16, Layout::kNT, {2, 2, 2, kKm, kKm, 0, kF32, CMode::kNone}, rng);
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  for (int i = 0; i < 4; ++i) {
    const uint16_t ha = f32_to_bf16(a[i]), hb = f32_to_bf16(b[i]);
    std::memcpy(g.a.storage.data() + 2 * i, &ha, 2);
    std::memcpy(g.b.storage.data() + 2 * i, &hb, 2);
  }
  g.run();
  EXPECT_EQ(g.d.get(0, 0), 17);
  EXPECT_EQ(g.d.get(0, 1), 23);
  EXPECT_EQ(g.d.get(1, 0), 39);
  EXPECT_EQ(g.d.get(1, 1), 53);
}

}  // namespace
}  // namespace tessera::test
