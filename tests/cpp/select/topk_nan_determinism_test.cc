// NaN policy, determinism across runs and thread counts (including rows split across threads), and the
// scalar/AVX-512 filters entry for entry.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>

#include "backends/cpu/select_kernels.h"
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

// The AVX-512 filter appends the same entries in the same order and stops at the same positions as
// the scalar reference, for every threshold regime, tail length and capacity.
TEST(TopkFilter, Avx512MatchesScalar) {
  if (!isa_supported(Isa::kAvx512) || !cpu::select_filter_avx512()) GTEST_SKIP() << "no AVX-512";
  Rng rng(11);
  for (int elem : {2, 4})
    for (int64_t n : {1, 15, 16, 31, 33, 64, 127, 129, 1000, 4099})
      for (int32_t threshold : {INT_MIN, -5, 0, 1 << 20, INT_MAX - 1, INT_MAX}) {
        std::vector<uint8_t> row(size_t(n * elem));
        for (auto& b : row) b = uint8_t(rng.bits32());
        for (int64_t cap : {int64_t(64), int64_t(100), int64_t(5000)}) {
          std::vector<int32_t> k1(size_t(cap + 64)), i1(size_t(cap + 64)), k2(size_t(cap + 64)), i2(size_t(cap + 64));
          cpu::SelectFilterArgs a{row.data(), elem, 3 % n, n,       threshold, k1.data(),
                                  i1.data(),  0,    cap,   INT_MAX, INT_MIN,   int(rng.index(1025))};
          cpu::SelectFilterArgs b = a;
          b.keys = k2.data();
          b.index = i2.data();
          cpu::select_filter_scalar()(&a);
          cpu::select_filter_avx512()(&b);
          const std::string what = "elem=" + std::to_string(elem) + " n=" + std::to_string(n) +
                                   " thr=" + std::to_string(threshold) + " cap=" + std::to_string(cap);
          ASSERT_EQ(a.pos, b.pos) << what;
          ASSERT_EQ(a.count, b.count) << what;
          ASSERT_EQ(a.min_key, b.min_key) << what;
          ASSERT_EQ(a.max_key, b.max_key) << what;
          for (int64_t j = 0; j < a.count; ++j) {
            ASSERT_EQ(k1[size_t(j)], k2[size_t(j)]) << what << " entry " << j;
            ASSERT_EQ(i1[size_t(j)], i2[size_t(j)]) << what << " entry " << j;
          }
        }
      }
}

}  // namespace
}  // namespace tessera::test
