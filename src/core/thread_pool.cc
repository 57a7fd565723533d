// The pool keeps T-1 worker threads; the calling thread acts as worker 0. A job is published as one
// region word; workers spin on it for a short time (TESSERA_SPIN_US, default 100 us) and then sleep on
// it with std::atomic::wait (a futex), so a burst of small jobs costs no system calls. Each share of a
// job is taken by exactly one thread (a compare-and-swap of the share's last region number), so shares
// that may run on any thread (parallel_shares, parallel_for) are taken by whichever thread is free
// first: on a machine whose other processes keep a worker off its CPU, the caller runs that worker's
// share instead of waiting a scheduler time slice for it.
#include "tessera/core/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/env.h"
#include "core/spin_hints.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"

namespace tessera {
namespace {

thread_local bool t_in_region = false;
std::atomic<uint64_t> g_region_epoch{0};

int default_threads() {
  if (const int64_t n = env::integer("TESSERA_NUM_THREADS", 0, 0, 1 << 16); n > 0) return int(n);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const int hc = int(std::thread::hardware_concurrency());
  return hc > 0 ? hc : 1;
}

int64_t spin_ns() {
  return env::integer("TESSERA_SPIN_US", 100, 0, 10'000'000) * 1000;
}

// A region publishes one word: its number (48 bits), whether idle threads may take other threads' shares
// (1 bit) and its share count (15 bits). Reading the three at once matters: a worker that woke late
// must never pair an old region number with a newer region's share count.
constexpr int kShareBits = 15;
constexpr uint64_t kShareMask = (uint64_t(1) << kShareBits) - 1, kStealBit = uint64_t(1) << kShareBits;
constexpr int kMaxPoolThreads = int(kShareMask);

uint64_t pack_region(uint64_t number, bool steal, int shares) {
  return number << (kShareBits + 1) | (steal ? kStealBit : 0) | uint64_t(shares);
}
uint64_t region_number(uint64_t word) {
  return word >> (kShareBits + 1);
}
int region_shares(uint64_t word) {
  return int(word & kShareMask);
}
bool region_steals(uint64_t word) {
  return (word & kStealBit) != 0;
}

class Pool {
 public:
  Pool() { start(default_threads()); }
  ~Pool() { stop(); }

  int size() const { return size_; }

  void resize(int n) {
    std::lock_guard<std::mutex> lock(run_mutex_);
    if (n <= 0) n = default_threads();
    if (n == size_) return;
    stop();
    start(n);
  }

  // steal = false: share t runs on pool thread t (SPMD: distinct threads, all at once). steal = true:
  // a thread that has finished its share (the caller after share 0, a worker after its own) takes
  // shares no thread has started, so a worker the OS has not scheduled holds nothing up.
  void run(const std::function<void(int, int)>& fn, int max_threads, bool steal) {
    int active = size_;
    if (max_threads > 0 && max_threads < active) active = max_threads;
    if (!t_in_region) g_region_epoch.fetch_add(1, std::memory_order_relaxed);  // before any work runs
    std::unique_lock<std::mutex> lock(run_mutex_, std::try_to_lock);
    // Nested call, single thread, or another caller owns the pool: run inline.
    if (t_in_region || active <= 1 || !lock.owns_lock()) {
      const bool was = t_in_region;
      t_in_region = true;
      try {
        fn(0, 1);
      } catch (...) {
        t_in_region = was;
        throw;
      }
      t_in_region = was;
      return;
    }
    job_ = &fn;
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    const uint64_t number = ++regions_;
    claims_[0].store(number, std::memory_order_relaxed);  // share 0 is the caller's
    const uint64_t word = pack_region(number, steal, active);
    region_.store(word, std::memory_order_release);
    region_.notify_all();

    t_in_region = true;
    run_share(0, active);
    if (steal)
      for (int t = active - 1; t >= 1; --t)
        if (claim(t, number)) run_share(t, active);
    t_in_region = false;

    const int64_t deadline = now_ns() + spin_ns_;
    int done;
    while ((done = done_.load(std::memory_order_acquire)) != active) {
      if (now_ns() < deadline) {
        cpu_relax();
      } else {
        done_.wait(done, std::memory_order_acquire);
      }
    }
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void start(int n) {
    size_ = std::min(n, kMaxPoolThreads);
    spin_ns_ = spin_ns();
    quit_.store(false);
    claims_ = std::make_unique<std::atomic<uint64_t>[]>(size_t(size_));
    for (int t = 0; t < size_; ++t) claims_[t].store(0);
    // Workers start from the current region word: one read inside the new thread could already see
    // the first job's region and then wait for the next one forever.
    const uint64_t seen = region_.load();
    for (int t = 1; t < size_; ++t) workers_.emplace_back([this, t, seen] { worker(t, seen); });
  }

  void stop() {
    quit_.store(true);
    region_.store(pack_region(++regions_, false, 0), std::memory_order_release);
    region_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void record_error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }

  // Takes share t of region `number` if no thread has: the region's job stays valid until every share
  // taken has run, since the caller waits for all of them.
  bool claim(int t, uint64_t number) {
    uint64_t v = claims_[t].load(std::memory_order_relaxed);
    while (v < number)
      if (claims_[t].compare_exchange_weak(v, number, std::memory_order_acq_rel)) return true;
    return false;
  }

  void run_share(int t, int shares) {
    try {
      (*job_)(t, shares);
    } catch (...) {
      record_error();
    }
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == shares) done_.notify_one();
  }

  void worker(int tid, uint64_t seen) {
    t_in_region = true;
    for (;;) {
      const int64_t deadline = now_ns() + spin_ns_;
      uint64_t word;
      while ((word = region_.load(std::memory_order_acquire)) == seen) {
        if (now_ns() < deadline) {
          cpu_relax();
        } else {
          region_.wait(seen, std::memory_order_acquire);
        }
      }
      seen = word;
      if (quit_.load()) return;
      const uint64_t number = region_number(word);
      const int shares = region_shares(word);
      if (tid < shares && claim(tid, number)) run_share(tid, shares);
      if (region_steals(word))
        for (int t = 1; t < shares; ++t)
          if (claim(t, number)) run_share(t, shares);
    }
  }

  int size_ = 1;
  int64_t spin_ns_ = 0;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_, error_mutex_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::exception_ptr error_;
  uint64_t regions_ = 0;                             // regions started (the caller's, under run_mutex_)
  std::unique_ptr<std::atomic<uint64_t>[]> claims_;  // per share: the last region number that took it
  std::atomic<uint64_t> region_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> quit_{false};
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int num_threads() {
  return pool().size();
}
void set_num_threads(int n) {
  pool().resize(n);
}
bool in_parallel_region() {
  return t_in_region;
}
uint64_t parallel_region_epoch() {
  return g_region_epoch.load(std::memory_order_relaxed);
}

void parallel_run(const std::function<void(int, int)>& fn, int max_threads) {
  pool().run(fn, max_threads, false);
}

void parallel_shares(const std::function<void(int, int)>& fn, int max_shares) {
  pool().run(fn, max_shares, true);
}

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int max_t = int(n < num_threads() ? n : num_threads());
  parallel_shares(
      [&](int t, int nt) {
        const int64_t b = n * t / nt, e = n * (t + 1) / nt;
        if (b < e) fn(b, e);
      },
      max_t);
}

void parallel_for_2d(int64_t n0, int64_t n1, const std::function<void(int64_t, int64_t)>& fn) {
  if (n0 <= 0 || n1 <= 0) return;
  parallel_for(n0 * n1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i / n1, i % n1);
  });
}

}  // namespace tessera
