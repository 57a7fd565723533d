// `tessera bench attention`: the suites of bench/attention (FlashMLA here; MQA logits add theirs in
// attention_suites.cc).
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

extern const char* const kAttentionHelp;
std::vector<Row> run_attention_bench(const Options& options, const MachineLimits& limits);
void print_attention_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
