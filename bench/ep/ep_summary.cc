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
  std::fprintf(
      out,
      "\nep: GB/s = local-excluded bytes per rank (compared with the shm copy limit measured between the\n"
      "same ranks right after each case); *_logical rows count the rank's own tokens too. Peer: MPI_Alltoallv.\n");
  double worst_pct = INFINITY, worst_ratio = INFINITY, best_ceiling = 0;
  for (const char* op : {"dispatch_fp8", "dispatch_bf16", "combine_bf16", "combine_bf16_private_x"}) {
    const Row* r = find(rows, op);
    const Row* logical = find(rows, std::string(op) + "_logical");
    if (!r) continue;
    // What the ceiling's pattern would score against the same MPI time.
    const double ceiling_ratio =
        r->pct_ceiling > 0 && r->pct_of_limit > 0 ? r->peer_ratio * r->pct_ceiling / r->pct_of_limit : NAN;
    std::fprintf(
        out,
        "  %-22s %7.2f ms  %6.1f GB/s (logical %6.1f)  %6s of limit (ceiling %s)  %6s MPI_Alltoallv (ceiling %s)\n", op,
        r->time_ms, r->gbps, logical ? logical->gbps : NAN, format_pct(r->pct_of_limit).c_str(),
        format_pct(r->pct_ceiling).c_str(), format_ratio(r->peer_ratio).c_str(), format_ratio(ceiling_ratio).c_str());
    if (std::string(op) == "combine_bf16_private_x") continue;  // reported; combine_bf16 is the target's row
    worst_pct = std::fmin(worst_pct, r->pct_of_limit);
    worst_ratio = std::fmin(worst_ratio, r->peer_ratio);
    best_ceiling = std::fmax(best_ceiling, r->pct_ceiling);
  }
  std::fprintf(out,
               "  ceiling (dispatch): the %%limit of the dispatch's traffic pattern moved by the copy loop alone,\n"
               "  measured right after the case: each rank reads its rows once and writes each to every rank,\n"
               "  itself included (its own copy shares the memory bus but not the local-excluded count).\n"
               "  combine_bf16: x = recv_x (shared memory, read in place by the sources, as with\n"
               "  get_combine_input); combine_bf16_private_x: x in private memory.\n");
  bool low_latency = false;
  for (const char* op : {"ll_dispatch_fp8", "ll_combine_bf16"}) {
    const Row* r = find(rows, op);
    if (!r) continue;
    low_latency = true;
    std::fprintf(out, "  %-16s latency %7.1f us   MPI_Alltoallv %7.1f us", op, r->time_ms * 1e3, r->peer_time_ms * 1e3);
    if (r->pct_ceiling > 0 && r->pct_of_limit > 0) {
      // The layout's bytes moved at the copy limit: the time no implementation of this layout beats.
      const double floor_ms = r->time_ms * r->pct_of_limit / r->pct_ceiling;
      std::fprintf(out, "   layout floor %7.1f us at the copy limit (ceiling %s MPI_Alltoallv)", floor_ms * 1e3,
                   format_ratio(r->peer_time_ms / floor_ms).c_str());
    }
    std::fprintf(out, "\n");
  }
  if (low_latency)
    std::fprintf(out,
                 "  low latency: MPI_Alltoallv moves each dispatched token once per destination rank (dispatch) and\n"
                 "  each (token, expert) row once (combine); the low-latency dispatch writes one row per (token,\n"
                 "  destination expert), about top-k / ranks times the peer's bytes (the spec's per-expert layout).\n");
  if (std::isfinite(worst_pct))
    std::fprintf(
        out, "targets: dispatch/combine >= 80%% of the shm copy limit: worst %s %s; >= 2x MPI_Alltoallv: worst %s %s\n",
        format_pct(worst_pct).c_str(), worst_pct >= 80 ? "[met]" : "[not met]", format_ratio(worst_ratio).c_str(),
        worst_ratio >= 2 ? "[met]" : "[not met]");
  if (std::isfinite(worst_pct) && best_ceiling > 0 && best_ceiling < 80)
    std::fprintf(out,
                 "  (80%% of the limit is above the dispatch cases' measured ceiling (best %s) with these ranks)\n",
                 format_pct(best_ceiling).c_str());
}

}  // namespace tessera::bench
