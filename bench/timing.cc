#include "timing.h"

#include <chrono>
#include <thread>
#include <vector>

#include "tessera/core/timer.h"
#include "tessera/info.h"

namespace tessera::bench {

namespace {
double g_default_budget_s = 0.3;
int g_default_min_reps = 5;
}  // namespace

void set_timing_defaults(double budget_s, int min_reps) {
  g_default_budget_s = budget_s;
  g_default_min_reps = min_reps;
}

Timing time_median(const std::function<void(int64_t)>& call, double budget_s, int min_reps, int max_reps) {
  if (budget_s < 0) budget_s = g_default_budget_s;
  if (min_reps < 0) min_reps = g_default_min_reps;
  call(0);
  std::vector<double> samples;
  const int64_t start = now_ns();
  for (int64_t i = 1;; ++i) {
    const int64_t t0 = now_ns();
    call(i);
    const int64_t t1 = now_ns();
    samples.push_back(double(t1 - t0) * 1e-6);
    const int n = int(samples.size());
    if (n >= max_reps || (n >= min_reps && double(t1 - start) * 1e-9 >= budget_s)) break;
  }
  return Timing{median(samples), int(samples.size())};
}

// Idle OpenBLAS and libgomp workers busy-wait for a while before they block; 50 ms covers both
// (measured here: our first call right after a peer's was sometimes several times slower, later
// ones were not).
void settle_threads() {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

double dram_read_gbps_now() {
  return measure_dram_read_gbps();
}

double dram_copy_gbps_now() {
  return measure_dram_copy_gbps();
}

double bf16_peak_gflops_now() {
  return measure_bf16_peak_gflops();
}

}  // namespace tessera::bench
