// `tessera bench python`: DeepSeek-style calls through tessera's Python modules with torch tensors
// against the same calls at the native entry (python/tessera/bench_python.py does the timing).
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

extern const char* const kPythonHelp;
std::vector<Row> run_python_bench(const Options& options, const MachineLimits& limits);
// The worst ratio against the target (the Python path within 1.2x of the native entry).
void print_python_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
