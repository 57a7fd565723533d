// NaN policy and determinism across runs and thread counts (including rows split across threads), at
// the active level (TESSERA_ISA caps it). The vector kernels entry for entry: select_kernels_test.cc.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>

#include "select/topk_harness.h"

namespace tessera::test {
namespace {

TEST(TopkNan, MarkedRowsWhenNotAborting) {
  for (bool bf16 : {false, true})
    for (bool negative : {false, true}) {
      TopkCase c;
      c.rows = 5;
      c.cols = 9000;
      c.k = 100;
      c.bf16 = bf16;
      c.abort_on_nan = false;
      c.use_offset = true;
      Rng rng = Rng::for_current_test(bf16 * 2 + negative);
      TopkInputs in = make_inputs(c, rng);
      put_nan(c, &in, 1, 8999, negative);  // the last element: the filter's tail
      put_nan(c, &in, 3, 17, negative);
      ASSERT_TRUE(check_topk(c, in, run_topk(c, in), {1, 3}));
    }
}

TEST(TopkNan, AbortNamesTheFirstRowAndLeavesNanRowsUntouched) {
  for (bool bf16 : {false, true}) {
    TopkCase c;
    c.rows = 6;
    c.cols = 3000;
    c.k = 50;
    c.bf16 = bf16;
    Rng rng = Rng::for_current_test(bf16);
    TopkInputs in = make_inputs(c, rng);
    put_nan(c, &in, 2, 5, true);
    put_nan(c, &in, 4, 2999, false);
    // The runner poisons the outputs; run through the API directly to keep them after the throw.
    std::vector<int64_t> idx(size_t(c.rows * c.k), -5);
    const TensorView input(in.data.data(), bf16 ? DType::kBF16 : DType::kF32, {c.rows, c.cols});
    const TensorView iv(idx.data(), DType::kI64, {c.rows, c.k});
    EXPECT_TRUE(throws_invalid([&] { select::topk(input, c.k, nullptr, nullptr, nullptr, iv, nullptr); },
                               {"topk", "'input'", "row 2", "NaN"}));
    for (int64_t r : {2, 4})
      for (int64_t j = 0; j < c.k; ++j) ASSERT_EQ(idx[size_t(r * c.k + j)], -5) << "NaN row " << r << " was written";
    for (int64_t r : {0, 1, 3, 5}) ASSERT_NE(idx[size_t(r * c.k)], -5) << "row " << r << " was not written";
  }
}

TEST(TopkNan, ShortRowsAreNotChecked) {
  TopkCase c;
  c.rows = 2;
  c.cols = 40;
  c.k = 40;
  Rng rng(3);
  TopkInputs in = make_inputs(c, rng);
  put_nan(c, &in, 0, 7, false);
  const TopkOutputs out = run_topk(c, in);  // abort_when_nan_found = true: must not throw
  bool found = false;
  for (int64_t j = 0; j < c.k; ++j) found |= output_index(c, out, 0, j) == 7;
  EXPECT_TRUE(found) << "the NaN element of a short row is returned like any value";
}

// Bitwise-identical outputs for 20 runs and for 1, 2 and 3 threads; few long rows take the split path.
TEST(TopkDeterminism, RunsAndThreadCounts) {
  for (const auto& [rows, cols, k] :
       {std::tuple<int64_t, int64_t, int>{1, 200000, 2048}, {2, 131072, 512}, {7, 40000, 1000}}) {
    for (bool bf16 : {false, true}) {
      TopkCase c;
      c.rows = rows;
      c.cols = cols;
      c.k = k;
      c.bf16 = bf16;
      c.dist = Dist::kFewValues;  // heavy ties: any order dependence would show
      Rng rng = Rng::for_current_test(uint64_t(cols) + bf16);
      const TopkInputs in = make_inputs(c, rng);
      TopkOutputs first;
      {
        NumThreadsScope threads(1);
        first = run_topk(c, in);
      }
      ASSERT_TRUE(check_topk(c, in, first));
      for (int t : {2, 3}) {
        NumThreadsScope threads(t);
        const TopkOutputs again = run_topk(c, in);
        ASSERT_EQ(again.indices, first.indices) << c.str() << " threads=" << t;
        ASSERT_EQ(again.values, first.values) << c.str() << " threads=" << t;
      }
      for (int rep = 0; rep < 20; ++rep) {
        const TopkOutputs again = run_topk(c, in);
        ASSERT_EQ(again.indices, first.indices) << c.str() << " repeat " << rep;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::test
