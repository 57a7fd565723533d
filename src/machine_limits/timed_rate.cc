#include "machine_limits/timed_rate.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "tessera/core/thread_pool.h"
#include "tessera/core/timer.h"

namespace tessera::info {
namespace {

struct alignas(64) ThreadSpan {
  int64_t begin = 0, end = 0;
  double work = 0;
};

}  // namespace

double timed_rate(int threads, const std::function<double(int, int)>& body) {
  std::vector<ThreadSpan> spans(static_cast<size_t>(threads));
  std::atomic<int> arrived{0};
  int used = 1;
  parallel_run(
      [&](int t, int nt) {
        if (t == 0) used = nt;
        arrived.fetch_add(1);
        while (arrived.load(std::memory_order_acquire) < nt) {
        }
        spans[size_t(t)].begin = now_ns();
        spans[size_t(t)].work = body(t, nt);
        spans[size_t(t)].end = now_ns();
      },
      threads);
  int64_t begin = spans[0].begin, end = spans[0].end;
  double work = 0;
  for (int t = 0; t < used; ++t) {
    begin = std::min(begin, spans[size_t(t)].begin);
    end = std::max(end, spans[size_t(t)].end);
    work += spans[size_t(t)].work;
  }
  return work / (double(std::max<int64_t>(end - begin, 1)) * 1e-9);
}

double median_rate(int threads, const std::function<double(int, int)>& body) {
  std::vector<double> rates;
  for (int r = 0; r < kRateReps; ++r) rates.push_back(timed_rate(threads, body));
  return median(rates);
}

}  // namespace tessera::info
