// M-grouped GEMMs, contiguous layout (DeepGEMM's API, docs/gemm.md): bf16 and FP8 (per-token A, per-block B,
// fp32 scales), 'nt' and 'nn', per-row ids with -1 padding rows and psum ends with gaps and empty
// groups, with and without ensure_zero_padding, at every ISA level; K == 0, M_sum == 0; bitwise
// determinism across thread counts.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "gemm/grouped_harness.h"

namespace tessera::test {
namespace {

enum class Kind { kIds, kPsumZero, kPsumKeep };
const char* kind_name(Kind k) {
  return k == Kind::kIds ? "ids" : k == Kind::kPsumZero ? "psum_zero_padding" : "psum_untouched_gaps";
}

gemm::ContiguousLayout layout_of(const Buffer& ids, Kind kind, int alignment) {
  gemm::ContiguousLayout l;
  l.grouped_layout = ids.view;
  l.use_psum_layout = kind != Kind::kIds;
  l.ensure_zero_padding = kind != Kind::kPsumKeep;
  l.mk_alignment = alignment;
  return l;
}

TensorView swap_last2(TensorView v) {
  std::swap(v.shape[v.ndim - 1], v.shape[v.ndim - 2]);
  std::swap(v.strides[v.ndim - 1], v.strides[v.ndim - 2]);
  return v;
}

const std::vector<int64_t> kSizes = {7, 0, 33, 16, 20};
constexpr int kAlign = 16;

class GroupedContiguous : public ::testing::TestWithParam<std::tuple<Isa, Kind, bool>> {
 protected:
  void SetUp() override {
    if (!isa_supported(isa())) GTEST_SKIP() << "this CPU lacks " << isa_name(isa());
    if (const char* lower = emulated() ? same_kernels_as_lower_level(isa(), gemm_slots()) : nullptr)
      GTEST_SKIP() << "emulated run: " << isa_name(isa()) << " runs the GEMM kernels of " << lower;
    cap_.emplace(isa());
  }
  void TearDown() override { cap_.reset(); }
  Isa isa() const { return std::get<0>(GetParam()); }
  Kind kind() const { return std::get<1>(GetParam()); }
  bool nt() const { return std::get<2>(GetParam()); }

 private:
  std::optional<IsaCapScope> cap_;
};

TEST_P(GroupedContiguous, Bf16MatchesFloat64) {
  Rng rng = Rng::for_current_test();
  const int64_t n = 56, k = 136;
  const GroupedRows rows = grouped_rows(kSizes, kAlign, kind() != Kind::kIds);
  Bf16Operand a = random_bf16({rows.m_sum, k}, rng);
  Bf16Operand b = random_bf16({int64_t(kSizes.size()), n, k}, rng);
  const Buffer b_nn = transposed_groups(b.buf);
  const Buffer ids = int32_buffer(rows.layout);
  Buffer d = poisoned_bf16({rows.m_sum, n});
  const auto layout = layout_of(ids, kind(), kAlign);
  if (nt()) {
    gemm::m_grouped_bf16_gemm_nt_contiguous(a.buf.view, b.buf.view, d.view, layout);
  } else {
    gemm::m_grouped_bf16_gemm_nn_contiguous(a.buf.view, b_nn.view, d.view, layout);
  }
  const double diff = grouped_calc_diff(d, grouped_reference(a.values, b.values, rows.row_group, n, k), rows.row_group);
  EXPECT_LT(diff, 1e-5) << kind_name(kind()) << (nt() ? " nt" : " nn");
  EXPECT_TRUE(other_rows_are(d, rows.row_group, kind() != Kind::kPsumKeep)) << kind_name(kind());
}

TEST_P(GroupedContiguous, Fp8TokenTimesBlockMatchesFloat64) {
  Rng rng = Rng::for_current_test();
  const int64_t n = 40, k = 224;  // a K tail of 96 after one 128 block
  const GroupedRows rows = grouped_rows(kSizes, kAlign, kind() != Kind::kIds);
  const Fp8Operand a = quantised_fp8(0, rows.m_sum, k, 1, rng, rows.row_group);
  const Fp8Operand b = quantised_fp8(int64_t(kSizes.size()), n, k, 128, rng);
  const Buffer b_nn = transposed_groups(b.data);
  const Buffer ids = int32_buffer(rows.layout);
  Buffer d = poisoned_bf16({rows.m_sum, n});
  const auto layout = layout_of(ids, kind(), kAlign);
  const gemm::ScaledTensor sa{a.data.view, a.scale.view};
  if (nt()) {
    gemm::m_grouped_fp8_fp4_gemm_nt_contiguous(sa, {b.data.view, b.scale.view}, d.view, layout);
  } else {
    gemm::m_grouped_fp8_fp4_gemm_nn_contiguous(sa, {b_nn.view, swap_last2(b.scale.view)}, d.view, layout);
  }
  const double diff = grouped_calc_diff(d, grouped_reference(a.deq, b.deq, rows.row_group, n, k), rows.row_group);
  EXPECT_LT(diff, 1e-5) << kind_name(kind()) << (nt() ? " nt" : " nn");
  EXPECT_TRUE(other_rows_are(d, rows.row_group, kind() != Kind::kPsumKeep)) << kind_name(kind());
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GroupedContiguous,
                         ::testing::Combine(::testing::ValuesIn(all_isas()),
                                            ::testing::Values(Kind::kIds, Kind::kPsumZero, Kind::kPsumKeep),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<Isa, Kind, bool>>& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  kind_name(std::get<1>(info.param)) + (std::get<2>(info.param) ? "_nt" : "_nn");
                         });

TEST(GroupedContiguousEdges, ZeroKWritesZerosAndEmptyMDoesNothing) {
  Rng rng = Rng::for_current_test();
  const GroupedRows rows = grouped_rows({3, 5}, 4, false);
  Bf16Operand a = random_bf16({rows.m_sum, 0}, rng);
  Bf16Operand b = random_bf16({2, 8, 0}, rng);
  const Buffer ids = int32_buffer(rows.layout);
  Buffer d = poisoned_bf16({rows.m_sum, 8});
  gemm::m_grouped_bf16_gemm_nt_contiguous(a.buf.view, b.buf.view, d.view, layout_of(ids, Kind::kIds, 4));
  for (int64_t i = 0; i < d.numel(); ++i) ASSERT_EQ(d.data<uint16_t>()[i], 0) << "element " << i;

  Bf16Operand a0 = random_bf16({0, 16}, rng);
  Bf16Operand b0 = random_bf16({2, 8, 16}, rng);
  const Buffer no_ids = int32_buffer({});
  Buffer d0 = poisoned_bf16({0, 8});  // one element of backing storage, outside the empty view
  gemm::m_grouped_bf16_gemm_nt_contiguous(a0.buf.view, b0.buf.view, d0.view, layout_of(no_ids, Kind::kIds, 4));
  EXPECT_EQ(d0.data<uint16_t>()[0], kPoisonBf16Value);
}

// Same bits for 1, 2 and 3 threads on a problem large enough to be split.
TEST(GroupedContiguousDeterminism, SameBitsForAnyThreadCount) {
  Rng rng = Rng::for_current_test();
  const int64_t n = 96, k = 512;
  for (const bool psum : {false, true}) {
    const GroupedRows rows = grouped_rows({100, 37, 0, 64}, 32, psum);
    const Fp8Operand a = quantised_fp8(0, rows.m_sum, k, 1, rng, rows.row_group);
    const Fp8Operand b = quantised_fp8(4, n, k, 128, rng);
    Bf16Operand ab = random_bf16({rows.m_sum, k}, rng), bb = random_bf16({4, n, k}, rng);
    const Buffer ids = int32_buffer(rows.layout);
    const auto layout = layout_of(ids, psum ? Kind::kPsumZero : Kind::kIds, 32);
    for (const bool fp8 : {false, true}) {
      std::vector<uint8_t> first;
      for (const int threads : {1, 2, 3}) {
        NumThreadsScope scope(threads);
        Buffer d = poisoned_bf16({rows.m_sum, n});
        if (fp8) {
          gemm::m_grouped_fp8_fp4_gemm_nt_contiguous({a.data.view, a.scale.view}, {b.data.view, b.scale.view}, d.view,
                                                     layout);
        } else {
          gemm::m_grouped_bf16_gemm_nt_contiguous(ab.buf.view, bb.buf.view, d.view, layout);
        }
        if (threads == 1) {
          first = d.bytes;
        } else {
          EXPECT_TRUE(bitwise_equal(first, d.bytes, rows.m_sum, n, n, 2))
              << threads << " threads, " << (fp8 ? "fp8" : "bf16") << (psum ? " psum" : " ids");
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::test
