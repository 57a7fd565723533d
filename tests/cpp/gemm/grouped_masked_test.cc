// M-grouped GEMMs, masked layout (DeepGEMM's API, docs/gemm.md): D[g, :masked_m[g]] = A[g, :masked_m[g]] B[g]^T
// for bf16 and FP8, rows at or beyond masked_m[g] untouched (poisoned before the call), empty and full
// groups, at every ISA level; bitwise determinism across thread counts.
#include <gtest/gtest.h>

#include <optional>

#include "gemm/grouped_harness.h"

namespace tessera::test {
namespace {

// Row ids of the flattened [G * max_m] output: the group for rows below masked_m, else -1 (a [G, max_m, K]
// flattens to the [G * max_m, K] rows grouped_reference takes).
std::vector<int32_t> masked_rows(const std::vector<int32_t>& masked_m, int64_t max_m) {
  std::vector<int32_t> rows;
  for (size_t g = 0; g < masked_m.size(); ++g)
    for (int64_t r = 0; r < max_m; ++r) rows.push_back(r < masked_m[g] ? int32_t(g) : -1);
  return rows;
}

class GroupedMasked : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
    if (const char* lower = emulated() ? same_kernels_as_lower_level(GetParam(), gemm_slots()) : nullptr)
      GTEST_SKIP() << "emulated run: " << isa_name(GetParam()) << " runs the GEMM kernels of " << lower;
    cap_.emplace(GetParam());
  }
  void TearDown() override { cap_.reset(); }

 private:
  std::optional<IsaCapScope> cap_;
};

const std::vector<int32_t> kMaskedM = {5, 0, 24, 20};
constexpr int64_t kMaxM = 24;

TEST_P(GroupedMasked, Bf16) {
  Rng rng = Rng::for_current_test();
  const int64_t groups = int64_t(kMaskedM.size()), n = 40, k = 200;
  Bf16Operand a = random_bf16({groups, kMaxM, k}, rng);
  Bf16Operand b = random_bf16({groups, n, k}, rng);
  const Buffer masked = int32_buffer(kMaskedM);
  Buffer d = poisoned_bf16({groups, kMaxM, n});
  gemm::m_grouped_bf16_gemm_nt_masked(a.buf.view, b.buf.view, d.view, masked.view, 16);
  const std::vector<int32_t> rows = masked_rows(kMaskedM, kMaxM);
  EXPECT_LT(grouped_calc_diff(d, grouped_reference(a.values, b.values, rows, n, k), rows), 1e-5);
  EXPECT_TRUE(other_rows_are(d, rows, false));
}

TEST_P(GroupedMasked, Fp8TokenTimesBlock) {
  Rng rng = Rng::for_current_test();
  const int64_t groups = int64_t(kMaskedM.size()), n = 48, k = 224;
  // quantised_fp8 makes [G, rows, K] with per-token scales when gran_rows == 1
  const Fp8Operand a = quantised_fp8(groups, kMaxM, k, 1, rng);
  const Fp8Operand b = quantised_fp8(groups, n, k, 128, rng);
  const Buffer masked = int32_buffer(kMaskedM);
  Buffer d = poisoned_bf16({groups, kMaxM, n});
  gemm::m_grouped_fp8_fp4_gemm_nt_masked({a.data.view, a.scale.view}, {b.data.view, b.scale.view}, d.view, masked.view,
                                         20);
  const std::vector<int32_t> rows = masked_rows(kMaskedM, kMaxM);
  EXPECT_LT(grouped_calc_diff(d, grouped_reference(a.deq, b.deq, rows, n, k), rows), 1e-5);
  EXPECT_TRUE(other_rows_are(d, rows, false));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GroupedMasked, ::testing::ValuesIn(all_isas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

TEST(GroupedMaskedDeterminism, SameBitsForAnyThreadCount) {
  Rng rng = Rng::for_current_test();
  const std::vector<int32_t> masked_m = {64, 3, 0, 41};
  const int64_t n = 96, k = 384;
  const Fp8Operand a = quantised_fp8(4, 64, k, 1, rng);
  const Fp8Operand b = quantised_fp8(4, n, k, 128, rng);
  const Buffer masked = int32_buffer(masked_m);
  std::vector<uint8_t> first;
  for (const int threads : {1, 2, 3}) {
    NumThreadsScope scope(threads);
    Buffer d = poisoned_bf16({4, 64, n});
    gemm::m_grouped_fp8_fp4_gemm_nt_masked({a.data.view, a.scale.view}, {b.data.view, b.scale.view}, d.view,
                                           masked.view, 32);
    if (threads == 1) {
      first = d.bytes;
    } else {
      EXPECT_TRUE(bitwise_equal(first, d.bytes, 4 * 64, n, n, 2)) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace tessera::test
