#include "limit_pct.h"

#include <algorithm>
#include <cmath>

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

// The peak of the products the active level's decode GEMVs use: fp32 FMAs at avx2 and avx512 (the
// Highway kernels), bf16 products above (vdpbf16ps or AMX tiles; bf16_peak_gflops is the best of them).
double decode_product_peak_gflops(const MachineLimits& start) {
  return int(active_isa()) <= int(Isa::kAvx512) ? start.fp32_peak_gflops : start.bf16_peak_gflops;
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
    default:  // scalar (the bench runs on x86 only; ARM levels have no targets here)
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

void set_decode_ceiling(Row* row, double flops_per_weight_byte, const MachineLimits& start) {
  const double dram = row->limit_value;  // the DRAM read figure set_dram_read_pct measured
  const double compute_gbps = decode_product_peak_gflops(start) / flops_per_weight_byte;
  if (!(dram > 0) || !(compute_gbps > 0)) return;
  row->pct_ceiling = 100.0 * std::min(1.0, compute_gbps / dram);
}

double geo_mean_pct_of_roofline(const std::vector<const Row*>& rows) {
  double log_sum = 0;
  int count = 0;
  for (const Row* r : rows) {
    const double pct = r->pct_of_limit / r->pct_ceiling * 100.0;
    if (!r->ok() || !std::isfinite(pct) || !(pct > 0)) continue;
    log_sum += std::log(pct);
    ++count;
  }
  return count ? std::exp(log_sum / count) : kNotAvailable;
}

}  // namespace tessera::bench
