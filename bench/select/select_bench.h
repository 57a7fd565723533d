// The top-k (DeepSelect) component of `tessera bench`.
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

extern const char* const kSelectHelp;
std::vector<Row> run_select_bench(const Options& options, const MachineLimits& limits);
// Geometric means per op and the two targets (60% of DRAM read, 5x the std:: peer).
void print_select_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
