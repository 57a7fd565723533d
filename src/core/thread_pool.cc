// The pool keeps T-1 worker threads; the calling thread acts as worker 0. A job is published by bumping
// a generation counter; workers spin on it for a short time (TESSERA_SPIN_US, default 100 us) and then
// sleep on it with std::atomic::wait (a futex), so a burst of small jobs costs no system calls.
#include "tessera/core/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <exception>
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

  void run(const std::function<void(int, int)>& fn, int max_threads) {
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
    active_ = active;
    error_ = nullptr;
    pending_.store(size_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();

    t_in_region = true;
    try {
      fn(0, active);
    } catch (...) {
      record_error();
    }
    t_in_region = false;

    const int64_t deadline = now_ns() + spin_ns_;
    int left;
    while ((left = pending_.load(std::memory_order_acquire)) != 0) {
      if (now_ns() < deadline) {
        cpu_relax();
      } else {
        pending_.wait(left, std::memory_order_acquire);
      }
    }
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void start(int n) {
    size_ = n;
    spin_ns_ = spin_ns();
    quit_.store(false);
    // Workers start from the current generation: one read inside the new thread could already see
    // the first job's bump and then wait for the next one forever.
    const uint64_t gen = generation_.load();
    for (int t = 1; t < n; ++t) workers_.emplace_back([this, t, gen] { worker(t, gen); });
  }

  void stop() {
    quit_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void record_error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }

  void worker(int tid, uint64_t seen) {
    t_in_region = true;
    for (;;) {
      const int64_t deadline = now_ns() + spin_ns_;
      uint64_t g;
      while ((g = generation_.load(std::memory_order_acquire)) == seen) {
        if (now_ns() < deadline) {
          cpu_relax();
        } else {
          generation_.wait(seen, std::memory_order_acquire);
        }
      }
      seen = g;
      if (quit_.load()) return;
      if (tid < active_) {
        try {
          (*job_)(tid, active_);
        } catch (...) {
          record_error();
        }
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  int size_ = 1;
  int64_t spin_ns_ = 0;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_, error_mutex_;
  const std::function<void(int, int)>* job_ = nullptr;
  int active_ = 1;
  std::exception_ptr error_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> quit_{false};
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }
void set_num_threads(int n) { pool().resize(n); }
bool in_parallel_region() { return t_in_region; }
uint64_t parallel_region_epoch() { return g_region_epoch.load(std::memory_order_relaxed); }

void parallel_run(const std::function<void(int, int)>& fn, int max_threads) { pool().run(fn, max_threads); }

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int max_t = int(n < num_threads() ? n : num_threads());
  parallel_run(
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
