// The FlashMLA summary: geometric means per op, then the decode and prefill targets of the active level
// (attention_targets(): a share of the level's peak where a row is compute-bound, else >= 70% of DRAM
// read on the bytes it must read; and a least ratio to dequant + oneDNN).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attention/mla_bench.h"
#include "limit_pct.h"
#include "peers/onednn_matmul.h"

namespace tessera::bench {
namespace {

std::vector<const Row*> select_op(const std::vector<Row>& rows, const std::string& op) {
  std::vector<const Row*> out;
  for (const Row& r : rows)
    if (r.op == op) out.push_back(&r);
  return out;
}

// Rows meeting their own limit's target and the peer ratio (a row without a peer figure is judged on
// its limit alone).
int rows_meeting_target(const std::vector<const Row*>& rows, const AttentionTargets& t) {
  int met = 0;
  for (const Row* r : rows) {
    const double target = r->limit_name == "bf16_peak_gflops" ? t.compute_pct : 70;
    const bool peer_ok = !std::isfinite(r->peer_ratio) || r->peer_ratio >= t.mla_peer_ratio;
    met += r->ok() && r->pct_of_limit >= target && peer_ok;
  }
  return met;
}

// Compute-bound rows against their GEMM ceiling (gemm_ceilings.h), geometric means per op.
void print_mla_ceilings(std::FILE* out, const std::vector<Row>& rows) {
  bool any = false;
  for (const char* op : {"mla_sparse_v32", "mla_sparse_model1", "mla_dense", "mla_prefill"}) {
    double log_of_ceiling = 0, log_ceiling = 0, log_peer_ceiling = 0;
    int n = 0, n_peer = 0;
    for (const Row* r : select_op(rows, op)) {
      if (!r->ok() || !(r->pct_ceiling > 0) || !(r->pct_of_limit > 0)) continue;
      log_of_ceiling += std::log(r->pct_of_limit / r->pct_ceiling);
      log_ceiling += std::log(r->pct_ceiling / 100.0);
      ++n;
      if (r->pct_peer_ceiling > 0) log_peer_ceiling += std::log(r->pct_peer_ceiling / 100.0), ++n_peer;
    }
    if (n == 0) continue;
    if (!any)
      std::fprintf(out,
                   "\nFlashMLA compute-bound rows against the GEMM ceiling (tessera's bf16 GEMM on one group's two "
                   "products; oneDNN's on the same products):\n");
    any = true;
    std::fprintf(out, "  %-18s %2d rows: %7s of the ceiling, which is %s of the limit (oneDNN's: %s)\n", op, n,
                 format_pct(100.0 * std::exp(log_of_ceiling / n)).c_str(),
                 format_pct(100.0 * std::exp(log_ceiling / n)).c_str(),
                 format_pct(n_peer ? 100.0 * std::exp(log_peer_ceiling / n_peer) : NAN).c_str());
  }
}

}  // namespace

void print_mla_summary(std::FILE* out, const std::vector<Row>& rows) {
  const char* ops[] = {"mla_sparse_v32", "mla_sparse_model1", "mla_dense", "mla_prefill"};
  bool any = false;
  for (const char* op : ops) {
    const std::vector<const Row*> group = select_op(rows, op);
    if (group.empty()) continue;
    if (!any) std::fprintf(out, "\nFlashMLA geometric means (rows that passed):\n");
    any = true;
    const GeoMeans g = geo_means(group);
    std::fprintf(out, "  %-18s %2d rows: %7s of limit  %7s dequant+%s\n", op, g.rows,
                 format_pct(g.pct_of_limit).c_str(), format_ratio(g.peer_ratio).c_str(), OnednnMatmul::label().c_str());
  }
  if (!any) return;
  print_mla_ceilings(out, rows);
  const AttentionTargets t = attention_targets();
  if (t.compute_pct <= 0) return;
  std::fprintf(out,
               "\nFlashMLA targets at %s (each row against its own limit: %.0f%% of the level's peak if "
               "compute-bound, else 70%% of DRAM read; and >= %.1fx dequant+%s):\n",
               t.level, t.compute_pct, t.mla_peer_ratio, OnednnMatmul::label().c_str());
  const char* decode_ops[][2] = {
      {"sparse FP8 decode", "mla_sparse_v32"}, {"dense decode", "mla_dense"}, {"sparse prefill", "mla_prefill"}};
  for (const auto& d : decode_ops) {
    std::vector<const Row*> group = select_op(rows, d[1]);
    if (std::string(d[1]) == "mla_sparse_v32")
      for (const Row* r : select_op(rows, "mla_sparse_model1")) group.push_back(r);
    if (group.empty()) continue;
    const int met = rows_meeting_target(group, t);
    std::fprintf(out, "  %-18s %d of %zu rows meet their target, geomean %s of limit %s\n", d[0], met, group.size(),
                 format_pct(geo_means(group).pct_of_limit).c_str(), met == int(group.size()) ? "[met]" : "[not met]");
  }
}

}  // namespace tessera::bench
