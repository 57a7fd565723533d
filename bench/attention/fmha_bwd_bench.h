// The FMHA backward rows of `tessera bench attention` (registered in attention_suites.cc).
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

std::vector<Row> run_fmha_bwd_bench(const Options& options, const MachineLimits& limits);
void print_fmha_bwd_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
