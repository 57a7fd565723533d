// A row's percent of this machine's limit. On a shared host the limits drift (DRAM read by up to 2x,
// the AMX tile rate by 2x-3.5x within minutes), so each row is compared with the figure measured right
// after it (pct_of_limit); the figure measured at the run's start gives pct_of_start_limit beside it.
#pragma once

#include "bench.h"

namespace tessera::bench {

// A compute-bound row: row->gflops over the all-thread bf16 peak.
void set_bf16_peak_pct(Row* row, const MachineLimits& start);
// A memory-bound row that moves `gbps` of counted bytes: over the DRAM read bandwidth.
void set_dram_read_pct(Row* row, double gbps, const MachineLimits& start);
// A row that reads and writes `gbps` of counted bytes: over the DRAM copy bandwidth.
void set_dram_copy_pct(Row* row, double gbps, const MachineLimits& start);

}  // namespace tessera::bench
