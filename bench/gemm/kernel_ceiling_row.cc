#include "gemm/kernel_ceiling_row.h"

#include <cstdio>

#include "tessera/info.h"

namespace tessera::bench {
namespace {

// The check sums kc = 1024 products in fp32 against float64: a few fp32 ulps of the largest |sum|.
constexpr double kRelTolerance = 1e-5;

}  // namespace

bool add_kernel_ceiling_row(const MachineLimits& start, std::vector<Row>* rows) {
  std::fprintf(stderr, "[bench gemm] the bf16 micro-kernel alone over packed panels in L2\n");
  const GemmKernelCeiling c = measure_gemm_kernel_ceiling();
  if (c.kernel.empty()) return false;
  Row row;
  row.component = "gemm";
  row.op = kKernelCeilingOpPrefix + c.kernel;
  row.m = c.rows;
  row.n = c.cols;
  row.k = c.kc;
  row.check_error = c.max_rel_err / kRelTolerance;
  if (row.check_error > 1.0) {
    row.status = "wrong result: micro-kernel sweep off the float64 reference by " + std::to_string(c.max_rel_err);
  } else {
    // The percent is the median over rounds of the kernel and the peak measured together (each
    // moves 2x within seconds here), not this median rate over a separate peak figure.
    row.gflops = c.gflops;
    row.time_ms = 2.0 * double(c.rows) * double(c.cols) * double(c.kc) / (c.gflops * 1e9) * 1e3;
    row.limit_name = "bf16_peak_gflops";
    row.limit_value = c.peak_gflops;
    row.pct_of_limit = c.pct_of_peak;
    row.pct_of_start_limit = 100.0 * c.gflops / start.bf16_peak_gflops;
  }
  rows->push_back(row);
  return true;
}

}  // namespace tessera::bench
