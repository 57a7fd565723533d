// The ep summary: what was compared with what, then the targets.
#include <cmath>
#include <cstdio>
#include <string>

#include "ep/ep_bench.h"

namespace tessera::bench {
namespace {

const Row* find(const std::vector<Row>& rows, const std::string& op) {
  for (const Row& r : rows)
    if (r.op == op && r.ok()) return &r;
  return nullptr;
}

}  // namespace

void print_ep_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out,
               "\nep: GB/s = local-excluded bytes per rank (compared with the shm copy limit measured between the\n"
               "same ranks right after each case); *_logical rows count the rank's own tokens too. Peer: MPI_Alltoallv.\n");
  double worst_pct = INFINITY, worst_ratio = INFINITY;
  for (const char* op : {"dispatch_fp8", "dispatch_bf16", "combine_bf16"}) {
    const Row* r = find(rows, op);
    const Row* logical = find(rows, std::string(op) + "_logical");
    if (!r) continue;
    // A perfect one-copy dispatch also copies the rank's own tokens, which local-excluded bytes do not
    // count: at equal copy rates it reaches (remote bytes / all bytes) of the limit. (Combine reads its
    // own contributions in place, so it has no such ceiling.)
    const bool dispatch = std::string(op).rfind("dispatch", 0) == 0;
    const double ceiling = logical && dispatch ? 100.0 * r->gbps / logical->gbps : NAN;
    std::fprintf(out, "  %-14s %7.2f ms  %6.1f GB/s (logical %6.1f)  %6s of limit%s%s%s  %6s MPI_Alltoallv\n", op,
                 r->time_ms, r->gbps, logical ? logical->gbps : NAN, format_pct(r->pct_of_limit).c_str(),
                 dispatch ? " (ceiling " : "", dispatch ? format_pct(ceiling).c_str() : "", dispatch ? ")" : "",
                 format_ratio(r->peer_ratio).c_str());
    worst_pct = std::fmin(worst_pct, r->pct_of_limit);
    worst_ratio = std::fmin(worst_ratio, r->peer_ratio);
  }
  for (const char* op : {"ll_dispatch_fp8", "ll_combine_bf16"}) {
    const Row* r = find(rows, op);
    if (r)
      std::fprintf(out, "  %-16s latency %7.1f us   MPI_Alltoallv of the same bytes %7.1f us\n", op, r->time_ms * 1e3,
                   r->peer_time_ms * 1e3);
  }
  if (std::isfinite(worst_pct))
    std::fprintf(out, "targets: dispatch/combine >= 80%% of the shm copy limit: worst %s %s; >= 2x MPI_Alltoallv: worst %s %s\n",
                 format_pct(worst_pct).c_str(), worst_pct >= 80 ? "[met]" : "[not met]",
                 format_ratio(worst_ratio).c_str(), worst_ratio >= 2 ? "[met]" : "[not met]");
}

}  // namespace tessera::bench
