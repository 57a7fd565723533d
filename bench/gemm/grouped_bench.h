// The grouped (MoE) rows of `tessera bench gemm`: each case next to tessera's dense GEMM doing the same
// work in the same run.
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

std::vector<Row> run_grouped_gemm_bench(const Options& options, const MachineLimits& limits);
// Geometric means per grouped op and the two grouped targets (>= 90% of dense, FP4 decode >= 80% of DRAM).
void print_grouped_gemm_summary(std::FILE* out, const std::vector<Row>& rows);

// `tessera bench gemm`: the dense suite, then the grouped one; the summary of both.
std::vector<Row> run_gemm_and_grouped_bench(const Options& options, const MachineLimits& limits);
void print_gemm_and_grouped_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
