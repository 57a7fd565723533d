// `tessera bench moe`: DeepGEMM's Mega MoE (fp8_fp4_mega_moe, one rank) against the unfused sequence
// of tessera's own parts on the same inputs.
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

extern const char* const kMoeHelp;
std::vector<Row> run_moe_bench(const Options& options, const MachineLimits& limits);
void print_moe_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
