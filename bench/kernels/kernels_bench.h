// `tessera bench kernels`: tessera.tile_kernels' memory-bound kernels against plain numpy and torch,
// and a SIMT-style tl softmax against the same softmax in tile style (python/tessera/bench_kernels
// does the timing; this file turns its lines into rows).
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

extern const char* const kKernelsHelp;
std::vector<Row> run_kernels_bench(const Options& options, const MachineLimits& limits);
// Per row the copy-bandwidth and numpy / torch targets; the SIMT row against its 1.5x target.
void print_kernels_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
