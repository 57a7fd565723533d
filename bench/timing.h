// Median timing of one call: warm up, then repeat until the budget is spent and at least min_reps
// samples exist (slow calls: min_reps samples; fast calls: about budget_s of samples).
#pragma once

#include <cstdint>
#include <functional>

namespace tessera::bench {

struct Timing {
  double median_ms = 0;
  int reps = 0;
};

// call(i) runs the operation once; i counts calls (0 = the warm-up) so a caller can rotate inputs.
// budget_s < 0 / min_reps < 0: the run's defaults (set_timing_defaults).
Timing time_median(const std::function<void(int64_t)>& call, double budget_s = -1, int min_reps = -1,
                   int max_reps = 20000);
// The defaults of time_median: 0.3 s and at least 5 samples, or less for the quick suite (its medians
// of hundreds of short calls hardly move, and on a slow level a long call then costs 4 calls, not 6,
// so the run fits in a few minutes on two cores).
void set_timing_defaults(double budget_s, int min_reps);

// Lets spinning worker threads of a library that just ran (OpenMP, OpenBLAS) go to sleep before the
// next measurement, so they do not steal cores from it.
void settle_threads();

// The DRAM read bandwidth to compare a memory-bound row with: measured right after the row was timed
// (tessera::measure_dram_read_gbps), because on a shared machine the figure drifts within minutes.
double dram_read_gbps_now();
// The same for the DRAM copy bandwidth (bytes read + written), for rows that read and write.
double dram_copy_gbps_now();
// The all-thread bf16 peak (GFLOP/s) measured now, for a compute-bound row (about 0.2 s).
double bf16_peak_gflops_now();

}  // namespace tessera::bench
