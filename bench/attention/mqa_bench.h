// The MQA-logits suite of `tessera bench attention` (registered in attention_suites.cc): DeepGEMM's
// lightning-indexer logits, prefill and paged decode.
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

std::vector<Row> run_mqa_bench(const Options& options, const MachineLimits& limits);
// Geometric means per op and the prefill target (>= 60% of bf16 peak).
void print_mqa_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
