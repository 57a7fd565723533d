// The GEMM component of `tessera bench`.
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

std::vector<Row> run_gemm_bench(const Options& options, const MachineLimits& limits);
// Geometric means per (op, M band) and the three target check lines (BF16, FP8, decode).
void print_gemm_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
