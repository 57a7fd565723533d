// The bf16 counting path (select/topk_bf16.h) under windows chosen to go wrong: whatever window it is
// given, it either selects exactly what the general path selects or says it cannot (false).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "select/topk_bf16.h"
#include "test_util.h"

namespace tessera::test {
namespace {

using namespace select::detail;

// A row of n bf16 values drawn from few distinct keys (ties) or from a normal spread.
std::vector<uint16_t> random_row(Rng& rng, int64_t n, bool few_values) {
  std::vector<uint16_t> row(static_cast<size_t>(n));
  for (auto& v : row) {
    const float f = few_values ? float(rng.uniform_int(-4, 4)) : float(rng.uniform(-3.0, 3.0));
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = uint16_t(bits >> 16);
  }
  return row;
}

// The general path's selection as sorted indices.
std::vector<int32_t> general_indices(const SelectKernels& kernels, const RowRef& row, int64_t n, int k) {
  const Workspace ws = thread_workspace(k, 0);
  const PartTopk part = collect_topk(kernels, row, 0, n, k, ws);
  std::vector<int32_t> idx(ws.index, ws.index + part.count);
  std::sort(idx.begin(), idx.end());
  return idx;
}

class Bf16Path : public ::testing::TestWithParam<Isa> {};

TEST_P(Bf16Path, AnyWindowSelectsExactlyOrDeclines) {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported here";
  IsaCapScope cap(GetParam());
  const SelectKernels kernels = select_kernels();
  Rng rng = Rng::for_current_test();
  int exact = 0, declined = 0;
  for (const int64_t n : {int64_t(4096), int64_t(70001), int64_t(131072)}) {
    for (const int k : {1, 100, 2048}) {
      for (const bool few : {false, true}) {
        const std::vector<uint16_t> data = random_row(rng, n, few);
        const RowRef row{data.data(), true};
        ASSERT_TRUE(bf16_path_fits(n, k));
        const std::vector<int32_t> want = general_indices(kernels, row, n, k);
        const Workspace ws = thread_workspace(k, bf16_candidate_capacity(n, k));
        const KeyWindow sampled = sample_window(kernels, row, 0, n, k, ws);
        // The sampled window, one that admits everything (capacity overflow), one above every key
        // (too few candidates), a narrow one below the k-th key (k or more above hi) and one at it.
        const KeyWindow windows[] = {sampled,
                                     {-32769, 32767, 1024},
                                     {32766, 32767, 1},
                                     {-32769, -32768, 1024},
                                     {sampled.lo, sampled.lo + 1, 512}};
        for (const KeyWindow& w : windows) {
          Bf16Selection sel;
          if (!select_bf16_in_window(kernels, row, 0, n, k, w, ws, &sel)) {
            ++declined;
            continue;
          }
          ASSERT_FALSE(sel.nan);
          std::vector<int32_t> got(size_t(k), -1);
          emit_bf16(kernels, sel, k, 0, got.data(), nullptr, nullptr, nullptr);
          ASSERT_TRUE(std::is_sorted(got.begin(), got.end())) << "n=" << n << " k=" << k;
          ASSERT_EQ(got, want) << "n=" << n << " k=" << k << " few=" << few << " window=(" << w.lo << ", " << w.hi
                               << "]";
          ++exact;
        }
      }
    }
  }
  EXPECT_GT(exact, 0);
  EXPECT_GT(declined, 0);
}

INSTANTIATE_TEST_SUITE_P(Isas, Bf16Path, ::testing::ValuesIn(all_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace tessera::test
