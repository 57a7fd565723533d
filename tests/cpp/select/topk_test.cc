// tessera::select::topk against an independent reference: every shape class (short rows, V not a
// multiple of the vector width, long rows that flush the candidate buffer, rows split across threads),
// every output mode, both dtypes and index types, tie-heavy and special-value distributions, and every
// ISA level.
#include <gtest/gtest.h>

#include "select/topk_harness.h"

namespace tessera::test {
namespace {

struct Shape {
  int64_t rows, cols;
  int k;
};

// Short rows, tails of the 16/32-wide vectors and 4-vector unroll, rows above the sampling threshold,
// rows that overflow the candidate buffer, the sampler and indexer shapes (scaled).
const Shape kShapes[] = {{3, 1, 1},        {5, 7, 3},        {4, 31, 31},     {3, 33, 8},      {2, 129, 128},
                         {3, 500, 17},     {2, 4095, 1},     {3, 5000, 100},  {2, 9000, 2048}, {2, 20001, 512},
                         {1, 129280, 512}, {2, 65600, 2048}, {1, 40000, 4096}};

class TopkShapes : public ::testing::TestWithParam<std::tuple<Isa, bool>> {};

TEST_P(TopkShapes, MatchesReferenceInEveryMode) {
  const auto [isa, bf16] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "ISA not supported here";
  IsaCapScope cap(isa);
  Rng rng = Rng::for_current_test();
  int variant = 0;
  for (const Shape& s : kShapes) {
    TopkCase c;
    c.rows = s.rows;
    c.cols = s.cols;
    c.k = s.k;
    c.bf16 = bf16;
    // Rotate the options so every shape sees several combinations without a full product.
    const int v = variant++;
    c.idx64 = v % 2 == 0;
    c.sorted = v % 3 == 1;
    c.sorted_index = v % 3 == 2;
    c.with_values = c.sorted || v % 4 != 3;
    c.use_end = v % 2 == 1;
    c.use_begin = v % 5 == 2;
    c.use_offset = v % 3 == 0;
    c.row_pad = v % 2 ? 5 : 0;
    c.idx_fill = v % 2 ? -2000000 + s.cols : 2147483647;
    c.value_fill = v % 2 ? 1.5f : -INFINITY;
    const TopkInputs in = make_inputs(c, rng);
    const TopkOutputs out = run_topk(c, in, v % 3);
    ASSERT_TRUE(check_topk(c, in, out));
  }
}

INSTANTIATE_TEST_SUITE_P(IsaDtype, TopkShapes, ::testing::Combine(::testing::ValuesIn(all_isas()), ::testing::Bool()));

class TopkDistributions : public ::testing::TestWithParam<std::tuple<Dist, bool>> {};

TEST_P(TopkDistributions, TiesZerosAndInfinitiesFollowTheOrder) {
  const auto [dist, bf16] = GetParam();
  Rng rng = Rng::for_current_test();
  for (const Shape& s : {Shape{4, 300, 17}, Shape{2, 20000, 1000}, Shape{1, 70000, 2048}}) {
    for (bool sorted : {false, true}) {
      TopkCase c;
      c.rows = s.rows;
      c.cols = s.cols;
      c.k = s.k;
      c.bf16 = bf16;
      c.dist = dist;
      c.sorted = sorted;
      const TopkInputs in = make_inputs(c, rng);
      ASSERT_TRUE(check_topk(c, in, run_topk(c, in)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, TopkDistributions,
                         ::testing::Combine(::testing::Values(Dist::kNormal, Dist::kScaled, Dist::kFewValues,
                                                              Dist::kSignedZeros, Dist::kInfinities, Dist::kRawBits),
                                            ::testing::Bool()));

// A row whose prefix is far below its tail: the sampled threshold must not miss the top, and the
// buffer must flush several times when the values rise along the row.
TEST(Topk, RisingAndFallingRows) {
  for (bool bf16 : {false, true})
    for (bool rising : {false, true}) {
      TopkCase c;
      c.rows = 2;
      c.cols = 50000;
      c.k = 700;
      c.bf16 = bf16;
      TopkInputs in;
      in.data.resize(size_t(c.rows * c.cols * (bf16 ? 2 : 4)));
      for (int64_t i = 0; i < c.rows * c.cols; ++i) {
        const int64_t col = i % c.cols;
        const float v = float(rising ? col : c.cols - col) * 0.25f;
        if (bf16) {
          const uint16_t h = f32_to_bf16(v);
          std::memcpy(in.data.data() + 2 * i, &h, 2);
        } else {
          std::memcpy(in.data.data() + 4 * i, &v, 4);
        }
      }
      in.begin.assign(2, 0);
      in.end.assign(2, int32_t(c.cols));
      in.offset.assign(2, 0);
      ASSERT_TRUE(check_topk(c, in, run_topk(c, in)));
    }
}

TEST(Topk, EmptyBatchWritesNothing) {
  TopkCase c;
  c.rows = 0;
  c.cols = 100;
  c.k = 10;
  Rng rng(1);
  const TopkInputs in = make_inputs(c, rng);
  EXPECT_TRUE(run_topk(c, in).indices.empty());
}

TEST(Topk, StrideRequirementIsDeepSelects) {
  EXPECT_EQ(select::get_stride_requirement(), std::make_pair(1024, 32));
}

}  // namespace
}  // namespace tessera::test
