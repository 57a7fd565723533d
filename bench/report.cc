// Text table, per-component summaries and the JSON array of `tessera bench`.
#include <cmath>
#include <cstdio>
#include <map>

#include "bench.h"
#include "json_writer.h"

namespace tessera::bench {
namespace {

double geo_mean(const std::vector<double>& values) {
  if (values.empty()) return kNotAvailable;
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / double(values.size()));
}

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The last column's header: x<name> when every row has the same second peer, else xpeer2.
std::string second_peer_header(const std::vector<Row>& rows) {
  for (const Row& r : rows)
    if (r.peer2 != rows.front().peer2) return "xpeer2";
  return "x" + (rows.empty() ? std::string("OpenBLAS") : rows.front().peer2);
}

}  // namespace

std::string format_ratio(double ratio) {
  return std::isfinite(ratio) ? fixed(ratio, 2) + "x" : "n/a";
}
std::string format_pct(double pct) {
  return std::isfinite(pct) ? fixed(pct, 1) + "%" : "n/a";
}

GeoMeans geo_means(const std::vector<const Row*>& rows) {
  std::vector<double> pct, start_pct, peer, blas;
  GeoMeans g;
  for (const Row* r : rows) {
    if (!r->ok()) continue;
    ++g.rows;
    if (std::isfinite(r->pct_of_limit) && r->pct_of_limit > 0) pct.push_back(r->pct_of_limit);
    if (std::isfinite(r->pct_of_start_limit) && r->pct_of_start_limit > 0) start_pct.push_back(r->pct_of_start_limit);
    if (std::isfinite(r->peer_ratio) && r->peer_ratio > 0) peer.push_back(r->peer_ratio);
    if (std::isfinite(r->openblas_ratio) && r->openblas_ratio > 0) blas.push_back(r->openblas_ratio);
  }
  g.pct_of_limit = geo_mean(pct);
  g.pct_of_start_limit = geo_mean(start_pct);
  g.peer_ratio = geo_mean(peer);
  g.openblas_ratio = geo_mean(blas);
  return g;
}

void print_table(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out, "%-14s %5s %6s %6s %10s %9s %8s %8s %-6s %-19s %7s %9s\n", "op", "M", "N", "K", "time_ms",
               "GFLOP/s", "GB/s", "%limit", "limit", "peer", "xpeer", second_peer_header(rows).c_str());
  for (const Row& r : rows) {
    std::fprintf(out, "%-14s %5lld %6lld %6lld ", r.op.c_str(), (long long)r.m, (long long)r.n, (long long)r.k);
    if (!r.ok()) {
      std::fprintf(out, "%s\n", r.status.c_str());
      continue;
    }
    const char* limit = r.limit_name == "dram_read_gbps"     ? "dram"
                        : r.limit_name == "dram_copy_gbps"   ? "copy"
                        : r.limit_name == "bf16_peak_gflops" ? "bf16pk"
                                                             : "";
    std::fprintf(out, "%10.3f %9.1f %8.1f %8s %-6s %-19s %7s %9s\n", r.time_ms, r.gflops, r.gbps,
                 format_pct(r.pct_of_limit).c_str(), limit, r.peer.empty() ? "n/a" : r.peer.c_str(),
                 format_ratio(r.peer_ratio).c_str(), format_ratio(r.openblas_ratio).c_str());
  }
}

void print_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::map<std::string, std::vector<Row>> by_component;
  for (const Row& r : rows) by_component[r.component].push_back(r);
  for (const auto& [name, component_rows] : by_component) {
    const Component* c = find_component(name);
    if (c && c->summarize) c->summarize(out, component_rows);
  }
}

void print_json(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out, "[");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    JsonObject o;
    o.add("component", r.component).add("op", r.op).add("m", r.m).add("n", r.n).add("k", r.k);
    o.add("status", r.status).add("time_ms", r.time_ms).add("gflops", r.gflops).add("gbps", r.gbps);
    o.add("pct_of_limit", r.pct_of_limit).add("pct_ceiling", r.pct_ceiling).add("pct_peer_ceiling", r.pct_peer_ceiling);
    o.add("limit_name", r.limit_name);
    o.add("limit_value", r.limit_value).add("pct_of_start_limit", r.pct_of_start_limit);
    o.add("check_error", r.check_error);
    if (r.peer.empty()) {
      o.add_null("peer");
    } else {
      o.add("peer", r.peer);
    }
    o.add("peer_time_ms", r.peer_time_ms).add("peer_ratio", r.peer_ratio);
    o.add("peer2", r.peer2).add("openblas_time_ms", r.openblas_time_ms).add("openblas_ratio", r.openblas_ratio);
    std::fprintf(out, "%s\n  %s", i ? "," : "", o.str().c_str());
  }
  std::fprintf(out, "\n]\n");
}

}  // namespace tessera::bench
