// The FlashMLA suite of `tessera bench attention` (registered in attention_suites.cc).
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

std::vector<Row> run_mla_bench(const Options& options, const MachineLimits& limits);
// Geometric means per MLA op and the decode targets.
void print_mla_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
