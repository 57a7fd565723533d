// The grouped GEMM summary: geometric means per op, then the two targets - grouped GEMMs at
// >= 90% of the dense GEMM doing the same work, FP4-weight decode at >= 80% of DRAM read bandwidth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gemm/grouped_bench.h"
#include "gemm/grouped_cases.h"
#include "limit_pct.h"

namespace tessera::bench {
namespace {

bool is_grouped(const Row& r) {
  return r.op.rfind("m_grouped_", 0) == 0;
}
bool is_decode_row(const Row& r) {
  return r.limit_name == "dram_read_gbps";
}

}  // namespace

void print_grouped_gemm_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::vector<std::string> ops;
  for (const Row& r : rows)
    if (is_grouped(r) && std::find(ops.begin(), ops.end(), r.op) == ops.end()) ops.push_back(r.op);
  if (ops.empty()) return;

  std::fprintf(out, "\ngrouped GEMMs, geometric means (rows that passed; peer = tessera's dense GEMM, same work):\n");
  std::vector<const Row*> compute, decode;
  for (const std::string& op : ops) {
    std::vector<const Row*> group;
    for (const Row& r : rows)
      if (r.op == op) {
        group.push_back(&r);
        (is_decode_row(r) ? decode : compute).push_back(&r);
      }
    const GeoMeans g = geo_means(group);
    std::fprintf(out, "  %-32s %2d rows: %7s of limit  %7s dense\n", op.c_str(), g.rows,
                 format_pct(g.pct_of_limit).c_str(), format_ratio(g.peer_ratio).c_str());
  }

  std::fprintf(out, "\ngrouped targets:\n");
  if (!compute.empty()) {
    const GeoMeans g = geo_means(compute);
    double worst = INFINITY;
    for (const Row* r : compute)
      if (r->ok() && std::isfinite(r->peer_ratio)) worst = std::min(worst, r->peer_ratio);
    const bool known = std::isfinite(g.peer_ratio);
    std::fprintf(out, "  grouped vs dense at the same work: geo-mean %s, worst %s (target >= 0.90x each) %s\n",
                 format_ratio(g.peer_ratio).c_str(), format_ratio(worst).c_str(),
                 !known         ? "[n/a]"
                 : worst >= 0.9 ? "[met]"
                                : "[not met]");
  }
  if (!decode.empty()) {
    const GeoMeans g = geo_means(decode);
    // The roofline: DRAM read, or the level's FMA peak where the rows per group make that lower.
    std::fprintf(out,
                 "  FP4-weight decode (M <= %lld per group): %s of DRAM read on the packed bytes (target 80%%) %s; "
                 "%s of roofline (DRAM or FMA peak)\n",
                 (long long)kGroupedDecodeMaxM, format_pct(g.pct_of_limit).c_str(),
                 !std::isfinite(g.pct_of_limit) ? "[n/a]"
                 : g.pct_of_limit >= 80         ? "[met]"
                                                : "[not met]",
                 format_pct(geo_mean_pct_of_roofline(decode)).c_str());
  }
}

}  // namespace tessera::bench
