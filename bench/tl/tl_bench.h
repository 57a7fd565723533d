// The tile-language component of `tessera bench`.
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

std::vector<Row> run_tl_bench(const Options& options, const MachineLimits& limits);
// The four target lines (GEMM vs library, elementwise and GEMV vs DRAM, FlashAttention vs peak) and
// the compile times.
void print_tl_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
