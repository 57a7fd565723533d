#include "limit_pct.h"

#include "tessera/core/cpu.h"
#include "timing.h"

namespace tessera::bench {
namespace {

// `throughput` (GFLOP/s or GB/s) over the limit `name`: `now` measured right after the row, `at_start`
// at the run's start.
void set_pct(Row* row, const char* name, double throughput, double now, double at_start) {
  row->limit_name = name;
  row->limit_value = now;
  row->pct_of_limit = 100.0 * throughput / now;
  row->pct_of_start_limit = 100.0 * throughput / at_start;
}

}  // namespace

AttentionTargets attention_targets() {
  switch (active_isa()) {
    case Isa::kAmx:
      return {30, 1.5, 3, "amx"};
    case Isa::kAvx512Bf16:
      return {60, 1, 1, "avx512bf16"};
    case Isa::kAvx512:
      return {50, 1, 1, "avx512"};
    case Isa::kAvx2:
      return {50, 1, 1, "avx2"};
    case Isa::kScalar:
      break;
  }
  return {0, 0, 0, "scalar"};
}

void set_bf16_peak_pct(Row* row, const MachineLimits& start) {
  set_pct(row, "bf16_peak_gflops", row->gflops, bf16_peak_gflops_now(), start.bf16_peak_gflops);
}

void set_dram_read_pct(Row* row, double gbps, const MachineLimits& start) {
  set_pct(row, "dram_read_gbps", gbps, dram_read_gbps_now(), start.dram_read_gbps);
}

void set_dram_copy_pct(Row* row, double gbps, const MachineLimits& start) {
  set_pct(row, "dram_copy_gbps", gbps, dram_copy_gbps_now(), start.dram_copy_gbps);
}

}  // namespace tessera::bench
