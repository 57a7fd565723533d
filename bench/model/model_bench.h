// `tessera bench model`: decode steps of a DeepSeek-V3.2 slice (the full model's layer sizes, few
// layers) against the step's roofline, extrapolated to the 61-layer model; and a tiny model's greedy
// generation against the same model in eager PyTorch.
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

extern const char* const kModelHelp;
std::vector<Row> run_model_bench(const Options& options, const MachineLimits& limits);
void print_model_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
