// The ep output arena on one rank (no MPI): 64 KiB granules handed out first-fit and given back
// coalesced, and, in ASan builds, its free space poisoned in the owner's mapping, so writing past an
// output tensor or into one already given back is reported.
#include "ep/transport/output_arena.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "ep/transport/asan_poison.h"

namespace tessera::ep::detail {
namespace {

constexpr int64_t kGranule = 64 << 10;

std::shared_ptr<ArenaState> fresh_arena(int64_t granules) {
  static std::atomic<int> serial{0};
  const std::string name = "/tessera-arena-test-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
  ShmSegment segment = ShmSegment::create(name, size_t(granules * kGranule));
  segment.unlink();
  return make_arena(std::move(segment));
}

TEST(OutputArena, HandsOutGranulesFirstFitAndCoalescesWhatComesBack) {
  auto arena = fresh_arena(4);
  int64_t at0 = -2, at1 = -2, at2 = -2, none = -2;
  OwnedTensor a = arena_tensor(arena, DType::kBF16, 3, 5, &at0);            // 30 bytes: one granule
  OwnedTensor b = arena_tensor(arena, DType::kF32, 2, kGranule / 4, &at1);  // two granules
  ASSERT_TRUE(a.defined() && b.defined());
  EXPECT_EQ(at0, 0);
  EXPECT_EQ(at1, kGranule);
  EXPECT_EQ(a.view.data, arena->segment.data());
  EXPECT_EQ(a.view.ndim, 2);
  EXPECT_EQ(a.view.shape[0], 3);
  EXPECT_EQ(a.view.shape[1], 5);
  OwnedTensor too_big = arena_tensor(arena, DType::kU8, 2, kGranule, &none);
  EXPECT_FALSE(too_big.defined());
  EXPECT_EQ(none, -1);
  static_cast<uint16_t*>(a.view.data)[14] = 0x3F80;  // the last element is usable
  a = OwnedTensor{};
  OwnedTensor c = arena_tensor(arena, DType::kU8, 1, kGranule, &at2);  // the first granule again
  EXPECT_EQ(at2, 0);
  b = OwnedTensor{};
  c = OwnedTensor{};
  OwnedTensor whole = arena_tensor(arena, DType::kU8, 4, kGranule, &at2);  // all four, coalesced
  EXPECT_TRUE(whole.defined());
  EXPECT_EQ(at2, 0);
}

TEST(OutputArenaDeathTest, ReportsWritesOutsideLiveOutputs) {
  if (!kAsanPoisons) GTEST_SKIP() << "poisoning needs an AddressSanitizer build (scripts/sanitize.sh)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto arena = fresh_arena(2);
  int64_t at = -1;
  OwnedTensor a = arena_tensor(arena, DType::kBF16, 3, 5, &at);
  ASSERT_TRUE(a.defined());
  volatile char* bytes = static_cast<char*>(a.view.data);
  bytes[29] = 1;                                              // inside
  EXPECT_DEATH(bytes[30] = 1, "use-after-poison");            // just past the 30 bytes
  EXPECT_DEATH(bytes[kGranule + 8] = 1, "use-after-poison");  // free space after it
  a = OwnedTensor{};
  EXPECT_DEATH(bytes[0] = 1, "use-after-poison");  // given back
}

}  // namespace
}  // namespace tessera::ep::detail
