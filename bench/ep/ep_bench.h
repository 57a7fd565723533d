// `tessera bench ep`: ElasticBuffer dispatch/combine and Buffer low-latency dispatch/combine between
// the ranks of an `mpirun` job, against the shared-memory copy limit measured in the same run and
// MPI_Alltoallv moving the same payload. Without mpirun (or with one rank) the suite is skipped.
#pragma once

#include <cstdio>
#include <vector>

#include "bench.h"

namespace tessera::bench {

extern const char* const kEpHelp;
std::vector<Row> run_ep_bench(const Options& options, const MachineLimits& limits);
void print_ep_summary(std::FILE* out, const std::vector<Row>& rows);

}  // namespace tessera::bench
