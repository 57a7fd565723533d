// The radix selection and sort on candidate buffers, against std::nth_element / std::stable_sort.
#include "select/radix_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>

#include "backends/cpu/registry.h"
#include "backends/cpu/select_kernels.h"
#include "test_util.h"

namespace tessera::test {
namespace {

using select::detail::KthKey;

std::vector<int32_t> random_keys(Rng& rng, int64_t n, int mode) {
  std::vector<int32_t> keys(static_cast<size_t>(n));
  for (auto& k : keys) {
    switch (mode) {
      case 0:
        k = int32_t(rng.bits32());
        break;  // full range
      case 1:
        k = rng.uniform_int(-3, 3);
        break;  // ties
      case 2:
        k = rng.index(2) ? INT_MIN : INT_MAX;
        break;  // extremes
      default:
        k = int32_t(rng.bits32() >> 20) - 2000;
        break;  // narrow range
    }
  }
  return keys;
}

TEST(RadixSelect, KthLargestAndCompaction) {
  std::vector<cpu::SelectCompactFn> compactions = {cpu::select_kernels_scalar()->compact};
  for (Isa level : all_isas())
    if (isa_supported(level))
      compactions.push_back(static_cast<const cpu::SelectKernelTable*>(
                                cpu::choose_kernel_at(cpu::Slot::kSelect, level, "radix_select_test").table)
                                ->compact);
  Rng rng(5);
  for (int mode = 0; mode < 4; ++mode)
    for (int64_t n : {1, 2, 17, 1000, 5000})
      for (int64_t k : {int64_t(1), n / 2 + 1, n}) {
        std::vector<int32_t> keys = random_keys(rng, n, mode), scratch(static_cast<size_t>(n));
        std::vector<int32_t> sorted = keys;
        std::sort(sorted.begin(), sorted.end(), std::greater<>());
        const KthKey kth = select::detail::kth_largest(keys.data(), n, k, scratch.data());
        ASSERT_EQ(kth.key, sorted[size_t(k - 1)]) << "mode " << mode << " n " << n << " k " << k;
        const int64_t greater = std::count_if(keys.begin(), keys.end(), [&](int32_t x) { return x > kth.key; });
        ASSERT_EQ(kth.take_equal, k - greater);
        for (cpu::SelectCompactFn compact : compactions) {
          std::vector<int32_t> index(static_cast<size_t>(n + cpu::kSelectFilterSlack));
          for (int64_t i = 0; i < n; ++i) index[size_t(i)] = int32_t(i);
          std::vector<int32_t> kept = keys;
          kept.resize(index.size());
          ASSERT_EQ(compact(kept.data(), index.data(), n, kth.key, kth.take_equal), k);
          // Kept: in index order, and the equal keys kept are the first take_equal of them.
          std::vector<int32_t> kept_equal, first_equal;
          for (int64_t j = 0; j < k; ++j) {
            ASSERT_EQ(kept[size_t(j)], keys[size_t(index[size_t(j)])]);
            if (j) {
              ASSERT_LT(index[size_t(j - 1)], index[size_t(j)]) << "order kept";
            }
            if (kept[size_t(j)] == kth.key) kept_equal.push_back(index[size_t(j)]);
          }
          for (int64_t i = 0; i < n && int64_t(first_equal.size()) < kth.take_equal; ++i)
            if (keys[size_t(i)] == kth.key) first_equal.push_back(int32_t(i));
          ASSERT_EQ(kept_equal, first_equal);
        }
      }
}

TEST(RadixSelect, StableDescendingSort) {
  Rng rng(6);
  for (int mode = 0; mode < 4; ++mode)
    for (int64_t n : {0, 1, 2, 33, 4096}) {
      std::vector<int32_t> keys = random_keys(rng, n, mode), index(static_cast<size_t>(n)), tk(static_cast<size_t>(n)),
                           ti(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) index[size_t(i)] = int32_t(i);
      std::vector<std::pair<int32_t, int32_t>> ref;
      for (int64_t i = 0; i < n; ++i) ref.emplace_back(keys[size_t(i)], int32_t(i));
      std::stable_sort(ref.begin(), ref.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      select::detail::sort_desc_stable(keys.data(), index.data(), n, tk.data(), ti.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(keys[size_t(i)], ref[size_t(i)].first) << "mode " << mode << " n " << n << " at " << i;
        ASSERT_EQ(index[size_t(i)], ref[size_t(i)].second) << "mode " << mode << " n " << n << " at " << i;
      }
    }
}

}  // namespace
}  // namespace tessera::test
