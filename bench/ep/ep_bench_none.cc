// `tessera bench ep` in a build without MPI: nothing to run.
#include <cstdio>

#include "ep/ep_bench.h"

namespace tessera::bench {

const char* const kEpHelp = "tessera bench ep: this build has no MPI, so the ep suite is not available.\n";

std::vector<Row> run_ep_bench(const Options&, const MachineLimits&) {
  std::fprintf(stderr, "tessera bench ep: skipped: this build has no MPI\n");
  return {};
}

void print_ep_summary(std::FILE*, const std::vector<Row>&) {}

}  // namespace tessera::bench
