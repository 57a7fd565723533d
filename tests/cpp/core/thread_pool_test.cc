// The persistent pool: coverage and static partitioning of parallel_for / parallel_for_2d, shares that
// any free thread may take (parallel_shares), nesting, exception propagation, many back-to-back tiny
// jobs, and SPMD regions that wait for each other interleaved with shared ones on one CPU.
#include "tessera/core/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"

namespace tessera::test {
namespace {

class ThreadPoolTest : public ::testing::TestWithParam<int> {};

TEST_P(ThreadPoolTest, ParallelForCoversEachIndexOnceInStaticChunks) {
  NumThreadsScope threads(GetParam());
  ASSERT_EQ(num_threads(), GetParam());
  for (int64_t n : {0, 1, 2, 3, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> chunks;
    parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
      std::lock_guard<std::mutex> lock(mu);
      chunks.emplace_back(b, e);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "n=" << n << " index " << i;
    // The documented partition: T = min(n, threads) chunks [t*n/T, (t+1)*n/T).
    std::sort(chunks.begin(), chunks.end());
    std::vector<std::pair<int64_t, int64_t>> expected;
    const int64_t t_count = std::min<int64_t>(n, GetParam());
    for (int64_t t = 0; t < t_count; ++t)
      if (t * n / t_count < (t + 1) * n / t_count) expected.emplace_back(t * n / t_count, (t + 1) * n / t_count);
    EXPECT_EQ(chunks, expected) << "n=" << n;
  }
}

TEST_P(ThreadPoolTest, ParallelFor2dCoversEachCellOnce) {
  NumThreadsScope threads(GetParam());
  for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, 5}, {5, 0}, {1, 1}, {3, 7}, {17, 33}}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n0 * n1));
    parallel_for_2d(n0, n1, [&](int64_t i0, int64_t i1) {
      ASSERT_TRUE(i0 >= 0 && i0 < n0 && i1 >= 0 && i1 < n1);
      hits[size_t(i0 * n1 + i1)]++;
    });
    for (int64_t i = 0; i < n0 * n1; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << n0 << "x" << n1 << " cell " << i;
  }
}

TEST_P(ThreadPoolTest, ParallelRunCallsEveryThreadIndexOnce) {
  NumThreadsScope threads(GetParam());
  for (int max_threads : {0, 1, 2, 64}) {
    const int expect_nt = max_threads > 0 ? std::min(max_threads, GetParam()) : GetParam();
    std::vector<std::atomic<int>> hits(static_cast<size_t>(GetParam()));
    std::atomic<int> bad_nt{0};
    std::mutex mu;
    std::vector<std::thread::id> ids;
    parallel_run(
        [&](int t, int nt) {
          if (nt != expect_nt) bad_nt++;
          hits[size_t(t)]++;
          std::lock_guard<std::mutex> lock(mu);
          ids.push_back(std::this_thread::get_id());
        },
        max_threads);
    EXPECT_EQ(bad_nt.load(), 0) << "max_threads=" << max_threads;
    for (int t = 0; t < GetParam(); ++t) EXPECT_EQ(hits[size_t(t)].load(), t < expect_nt ? 1 : 0) << "t=" << t;
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(std::unique(ids.begin(), ids.end()) - ids.begin(), expect_nt) << "distinct threads";
  }
}

TEST_P(ThreadPoolTest, ParallelSharesRunsEveryShareOnceOnPoolThreads) {
  NumThreadsScope threads(GetParam());
  std::mutex mu;
  std::vector<std::thread::id> pool_ids;
  parallel_run([&](int, int) {
    std::lock_guard<std::mutex> lock(mu);
    pool_ids.push_back(std::this_thread::get_id());
  });
  for (int max_shares : {0, 1, 2, 64}) {
    const int expect_shares = max_shares > 0 ? std::min(max_shares, GetParam()) : GetParam();
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(GetParam()));
      std::atomic<int> bad{0};
      parallel_shares(
          [&](int t, int shares) {
            if (shares != expect_shares || t < 0 || t >= shares) bad++;
            if (std::find(pool_ids.begin(), pool_ids.end(), std::this_thread::get_id()) == pool_ids.end()) bad++;
            hits[size_t(t)]++;
          },
          max_shares);
      ASSERT_EQ(bad.load(), 0) << "max_shares=" << max_shares;
      for (int t = 0; t < GetParam(); ++t)
        ASSERT_EQ(hits[size_t(t)].load(), t < expect_shares ? 1 : 0) << "max_shares=" << max_shares << " share " << t;
    }
  }
}

// With every pool thread on one CPU, workers are often off the CPU when a region starts: the caller
// then takes their shares (parallel_for), while SPMD regions (parallel_run) still run their calls on
// distinct threads at once: a barrier in them completes. Each share still runs exactly once.
TEST_P(ThreadPoolTest, SharedAndSpmdRegionsInterleaveOnOneCpu) {
  cpu_set_t saved, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &saved)) first = c;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  NumThreadsScope threads(GetParam());  // the pool's threads start after the pin and inherit it
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  set_num_threads(GetParam() == 1 ? 2 : 1);  // restart the workers under the pinned mask
  set_num_threads(GetParam());
  int64_t covered = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<std::atomic<int>> hits(97);
    parallel_for(97, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
    });
    for (int64_t i = 0; i < 97; ++i) covered += hits[size_t(i)].load() == 1 ? 1 : 0;
    if (round % 30 == 0) {
      std::atomic<int> arrived{0};
      parallel_run([&](int, int nt) {
        arrived++;
        while (arrived.load() < nt) std::this_thread::yield();
      });
      EXPECT_EQ(arrived.load(), GetParam());
    }
  }
  sched_setaffinity(0, sizeof(saved), &saved);
  set_num_threads(GetParam() == 1 ? 2 : 1);  // workers off the pinned CPU again
  EXPECT_EQ(covered, 300 * 97);
}

TEST_P(ThreadPoolTest, NestedCallsRunInlineOnTheCallingThread) {
  NumThreadsScope threads(GetParam());
  EXPECT_FALSE(in_parallel_region());
  std::atomic<int> errors{0}, inner_calls{0};
  parallel_run([&](int, int) {
    if (!in_parallel_region()) errors++;
    const auto outer_id = std::this_thread::get_id();
    parallel_for(10, [&](int64_t b, int64_t e) {
      inner_calls++;
      if (b != 0 || e != 10 || std::this_thread::get_id() != outer_id) errors++;
    });
    parallel_run([&](int t, int nt) {
      if (t != 0 || nt != 1 || std::this_thread::get_id() != outer_id) errors++;
    });
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(inner_calls.load(), GetParam());
  EXPECT_FALSE(in_parallel_region());
}

TEST_P(ThreadPoolTest, ExceptionsPropagateAndThePoolStaysUsable) {
  NumThreadsScope threads(GetParam());
  for (int thrower = 0; thrower < GetParam(); ++thrower) {
    try {
      parallel_run([&](int t, int) {
        if (t == thrower) throw Error(ErrorCode::kRuntime, "worker " + std::to_string(t) + " failed");
      });
      ADD_FAILURE() << "no exception from thread " << thrower;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "worker " + std::to_string(thrower) + " failed");
    }
    EXPECT_FALSE(in_parallel_region());
  }
  // Every thread throws: exactly one exception reaches the caller.
  EXPECT_THROW(parallel_for(1000, [](int64_t, int64_t) { throw std::runtime_error("all"); }), std::runtime_error);
  // Still usable afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST_P(ThreadPoolTest, ManyTinyJobsBackToBack) {
  NumThreadsScope threads(GetParam());
  std::atomic<int64_t> count{0};
  for (int job = 0; job < 10000; ++job) parallel_for(4, [&](int64_t b, int64_t e) { count += e - b; });
  EXPECT_EQ(count.load(), 40000);
}

INSTANTIATE_TEST_SUITE_P(Threads, ThreadPoolTest, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& p) { return "t" + std::to_string(p.param); });

TEST(ThreadPool, SetNumThreadsResetsToDefault) {
  const int initial = num_threads();
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  set_num_threads(0);
  EXPECT_GE(num_threads(), 1);
  set_num_threads(initial);
  EXPECT_EQ(num_threads(), initial);
}

}  // namespace
}  // namespace tessera::test
