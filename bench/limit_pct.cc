#include "limit_pct.h"

#include "timing.h"

namespace tessera::bench {

void set_bf16_peak_pct(Row* row, const MachineLimits& start) {
  row->limit_name = "bf16_peak_gflops";
  row->limit_value = bf16_peak_gflops_now();
  row->pct_of_limit = 100.0 * row->gflops / row->limit_value;
  row->pct_of_start_limit = 100.0 * row->gflops / start.bf16_peak_gflops;
}

void set_dram_read_pct(Row* row, double gbps, const MachineLimits& start) {
  row->limit_name = "dram_read_gbps";
  row->limit_value = dram_read_gbps_now();
  row->pct_of_limit = 100.0 * gbps / row->limit_value;
  row->pct_of_start_limit = 100.0 * gbps / start.dram_read_gbps;
}

}  // namespace tessera::bench
