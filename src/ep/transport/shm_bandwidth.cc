// Process-to-process shared-memory copy bandwidth (see tessera/ep/shm_bandwidth.h).
#include "tessera/ep/shm_bandwidth.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/spin_hints.h"
#include "ep/common/active_kernels.h"
#include "ep/common/parallel_range.h"
#include "ep/transport/group_state.h"
#include "ep/transport/shm_segment.h"
#include "tessera/core/error.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tessera/core/timer.h"

namespace tessera::ep {
namespace {

constexpr int kReps = 7;
constexpr int64_t kDefaultBytes = int64_t(128) << 20;

struct alignas(64) Sync {
  std::atomic<int> arrived[2 * kReps + 2];
  int64_t ns[2][kReps];
};

void arrive_and_wait(std::atomic<int>& counter, int parties) {
  counter.fetch_add(1);
  while (counter.load(std::memory_order_acquire) < parties) cpu_relax();
}

// Copies src into dst with the ep copy loop (streaming stores) on `threads` threads.
void copy_into(char* dst, const char* src, size_t bytes, int threads) {
  const cpu::EpKernels& k = detail::kernels();
  const int64_t blocks = int64_t(bytes / 4096);
  detail::parallel_range(threads, blocks, [&](int64_t b0, int64_t b1) {
    k.copy(dst + b0 * 4096, src + b0 * 4096, size_t(b1 - b0) * 4096, 1);
    k.store_fence();
  });
}

}  // namespace

double measure_shm_copy_gbps(int64_t bytes) {
  const size_t n = size_t(bytes > 0 ? bytes : kDefaultBytes) / 4096 * 4096;
  const size_t shared_bytes = 2 * n + sizeof(Sync);
  void* p = mmap(nullptr, shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    fail(ErrorCode::kRuntime, "measure_shm_copy_gbps: mmap of ", shared_bytes, " bytes failed: ", std::strerror(errno));
  char* shared = static_cast<char*>(p);
  detail::prefault_pages(shared, 2 * n);
  Sync* sync = new (shared + 2 * n) Sync{};
  const pid_t child = fork();
  if (child < 0) {
    munmap(p, shared_bytes);
    fail(ErrorCode::kRuntime, "measure_shm_copy_gbps: fork failed: ", std::strerror(errno));
  }
  const int me = child == 0 ? 1 : 0;
  // Each process copies its private buffer into the half of the shared mapping the other one owns.
  char* src = static_cast<char*>(aligned_alloc_bytes(n));
  std::memset(src, 0x11 * (me + 1), n);
  char* dst = shared + size_t(1 - me) * n;
  for (int r = 0; r < kReps; ++r) {
    arrive_and_wait(sync->arrived[2 * r], 2);
    const int64_t t0 = now_ns();
    copy_into(dst, src, n, 1);
    sync->ns[me][r] = now_ns() - t0;
    arrive_and_wait(sync->arrived[2 * r + 1], 2);
  }
  std::free(src);
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  std::vector<double> rates;
  for (int r = 0; r < kReps; ++r)
    rates.push_back(double(n) / (double(std::max(sync->ns[0][r], sync->ns[1][r])) * 1e-9) * 1e-9);
  munmap(p, shared_bytes);
  return median(rates);
}

namespace {

// Rows of the fan-out: one bf16 token of hidden 7168 (the bench's configuration); the row stays in L1
// between its copies, as in dispatch. (Writing each 256 bytes to both destinations in one pass, or
// prefetching the next row, measured the same on this host.)
constexpr int64_t kPatternRow = 7168 * 2;

// One rank's part of a pattern over the node's segments: seg[l] is local rank l's segment (the copy
// uses only the next rank's).
void run_pattern(ShmPattern pattern, const std::vector<char*>& seg, int me, size_t n, const char* src, int threads) {
  const int L = int(seg.size());
  if (pattern == ShmPattern::kCopy) {
    copy_into(seg[size_t((me + 1) % L)], src, n, threads);
    return;
  }
  // Fan-out: row by row into this rank's slot of every segment, its own included.
  const cpu::EpKernels& k = detail::kernels();
  detail::parallel_range(threads, int64_t(n) / kPatternRow, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int l = 0; l < L; ++l)
        k.copy(seg[size_t(l)] + size_t(me) * n + size_t(r * kPatternRow), src + r * kPatternRow, size_t(kPatternRow),
               1);
    k.store_fence();
  });
}

}  // namespace

double measure_shm_pattern_gbps_in_group(Group& group, ShmPattern pattern, int64_t bytes) {
  detail::GroupState& st = group.state();
  const Topology& t = group.topology();
  const int L = t.num_local_ranks;
  // Every rank runs the collective parts, so a one-rank node still joins the group-wide gather.
  const int64_t row = pattern == ShmPattern::kCopy ? 4096 : kPatternRow;
  const size_t n = size_t((bytes > 0 ? bytes : kDefaultBytes) / row * row);
  // The copy writes the next rank's whole segment; the fan-out gives each source rank a slot.
  const size_t seg_bytes = pattern == ShmPattern::kCopy ? n : n * size_t(L);
  const double timeout = 120;
  const char* what =
      pattern == ShmPattern::kCopy ? "measure_shm_copy_gbps_in_group" : "measure_shm_pattern_gbps_in_group(fan-out)";
  // The operation names in a timeout's error.
  const std::string at_create = std::string(what) + ": create", at_map = std::string(what) + ": map",
                    at_start = std::string(what) + ": start", at_gather = std::string(what) + ": gather",
                    at_done = std::string(what) + ": done";
  double result = 0;
  if (L > 1) {
    const uint64_t counter = st.segments_made.fetch_add(1);
    const std::string base = "/tessera-ep-bw-" + std::to_string(st.nonce) + "-" + std::to_string(counter) + "-";
    detail::ShmSegment mine = detail::ShmSegment::create(base + std::to_string(t.rank), seg_bytes);
    st.node_net->barrier(timeout, at_create.c_str());
    // The segments this rank writes: the next rank's for the copy, every one for the fan-out (opening
    // pre-faults a mapping, so the copy maps only the one it uses).
    const int next = (t.local_rank + 1) % L;
    std::vector<detail::ShmSegment> peers;
    std::vector<char*> seg(static_cast<size_t>(L), nullptr);
    for (int l = 0; l < L; ++l) {
      if (l == t.local_rank) {
        seg[size_t(l)] = mine.data();
        continue;
      }
      if (pattern == ShmPattern::kCopy && l != next) continue;
      peers.push_back(
          detail::ShmSegment::open(base + std::to_string(t.node_ranks[size_t(t.node)][size_t(l)]), seg_bytes));
      seg[size_t(l)] = peers.back().data();
    }
    st.node_net->barrier(timeout, at_map.c_str());
    mine.unlink();
    char* src = static_cast<char*>(aligned_alloc_bytes(n));
    std::memset(src, 0x5A, n);
    const int threads = std::max(1, num_threads() / st.host_net->size());
    // Payload per rank: what crosses to the other ranks.
    const double payload = pattern == ShmPattern::kCopy ? double(n) : double(n) * (L - 1);
    std::vector<double> rates;
    for (int r = 0; r < kReps; ++r) {
      st.node_net->barrier(timeout, at_start.c_str());
      const int64_t t0 = now_ns();
      run_pattern(pattern, seg, t.local_rank, n, src, threads);
      const int64_t ns = now_ns() - t0;
      std::vector<int64_t> all(static_cast<size_t>(L));
      st.node_net->allgather(&ns, all.data(), sizeof ns, timeout, at_gather.c_str());
      rates.push_back(payload / (double(*std::max_element(all.begin(), all.end())) * 1e-9) * 1e-9);
    }
    std::free(src);
    result = median(rates);
  }
  st.net->barrier(timeout, at_done.c_str());
  return result;
}

double measure_shm_copy_gbps_in_group(Group& group, int64_t bytes) {
  return measure_shm_pattern_gbps_in_group(group, ShmPattern::kCopy, bytes);
}

}  // namespace tessera::ep
