#include "ep/common/parallel_range.h"

#include "tessera/core/thread_pool.h"

namespace tessera::ep::detail {

void parallel_range(int threads, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (threads <= 1 || n == 1) {
    fn(0, n);
    return;
  }
  parallel_shares(
      [&](int t, int nt) {
        const int64_t b = n * t / nt, e = n * (t + 1) / nt;
        if (b < e) fn(b, e);
      },
      threads);
}

}  // namespace tessera::ep::detail
