// The GEMM summary: geometric means per (op, M band), then the project's three GEMM targets.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gemm/gemm_bench.h"
#include "gemm/gemm_cases.h"
#include "gemm/kernel_ceiling_row.h"
#include "limit_pct.h"
#include "peers/onednn_matmul.h"

namespace tessera::bench {
namespace {

struct Band {
  const char* name;
  int64_t lo, hi;  // lo <= M <= hi
};
constexpr Band kBands[] = {{"M<=4", 1, kGemmDecodeMaxM}, {"M=64", 5, 127}, {"M>=128", 128, INT64_MAX}};

std::vector<const Row*> select(const std::vector<Row>& rows, const std::string& op, int64_t lo, int64_t hi) {
  std::vector<const Row*> out;
  for (const Row& r : rows)
    if (r.op == op && r.m >= lo && r.m <= hi) out.push_back(&r);
  return out;
}

const char* verdict(double pct, double pct_target, double ratio, double ratio_target) {
  if (!std::isfinite(pct) || !std::isfinite(ratio)) return "[n/a]";
  return pct >= pct_target && ratio >= ratio_target ? "[met]" : "[not met]";
}

// Decode: our FP8 time against oneDNN's bf16 time on the same shape (the bf16 row's peer).
double decode_ratio_vs_onednn_bf16(const std::vector<Row>& rows) {
  double log_sum = 0;
  int count = 0;
  for (const Row* f : select(rows, "fp8_gemm_nt", 1, kGemmDecodeMaxM)) {
    if (!f->ok()) continue;
    for (const Row* b : select(rows, "bf16_gemm_nt", f->m, f->m)) {
      if (b->n == f->n && b->k == f->k && std::isfinite(b->peer_time_ms)) {
        log_sum += std::log(b->peer_time_ms / f->time_ms);
        ++count;
      }
    }
  }
  return count ? std::exp(log_sum / count) : std::nan("");
}

const Row* kernel_ceiling_row(const std::vector<Row>& rows) {
  for (const Row& r : rows)
    if (r.ok() && r.op.rfind(kKernelCeilingOpPrefix, 0) == 0) return &r;
  return nullptr;
}

// The M >= 128 rows of `op` over the micro-kernel alone, each as a percent of its own peak measured
// right after it (so a change of the host's speed between the two moves neither).
std::string pct_of_kernel(const std::vector<Row>& rows, const std::string& op, const Row& kernel) {
  const std::vector<const Row*> group = select(rows, op, 128, INT64_MAX);
  if (group.empty()) return "n/a";
  return format_pct(100.0 * geo_means(group).pct_of_limit / kernel.pct_of_limit);
}

// Decode rows: the same throughput over each row's roofline (DRAM read, or the level's FMA peak where
// the row's flops per weight byte make that lower), so a row bound by compute reads as such.
std::string roofline_note(const std::vector<const Row*>& group) {
  return format_pct(geo_mean_pct_of_roofline(group)) + " of roofline (DRAM or FMA peak)";
}

// The percentages above divide by each row's limit measured right after it; this is the same
// throughput over the figures measured at the run's start.
std::string start_note(const GeoMeans& g) {
  return "; " + format_pct(g.pct_of_start_limit) + " of the limit measured at the start";
}

}  // namespace

void print_gemm_summary(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out, "\ngeometric means (rows that passed):\n");
  for (const std::string& op : gemm_ops()) {
    for (const Band& band : kBands) {
      const std::vector<const Row*> group = select(rows, op, band.lo, band.hi);
      if (group.empty()) continue;
      const GeoMeans g = geo_means(group);
      const bool decode = band.hi <= kGemmDecodeMaxM;
      const char* limit = decode ? "of DRAM read (weights)" : "of bf16 peak";
      std::fprintf(out, "  %-13s %-7s %2d rows: %7s %-22s %7s peer  %7s OpenBLAS%s\n", op.c_str(), band.name, g.rows,
                   format_pct(g.pct_of_limit).c_str(), limit, format_ratio(g.peer_ratio).c_str(),
                   format_ratio(g.openblas_ratio).c_str(), decode ? ("  " + roofline_note(group)).c_str() : "");
    }
  }

  std::fprintf(out, "\ntargets:\n");
  const std::string peer = OnednnMatmul::label();  // "oneDNN-fp32" where bf16 matmul was refused
  if (!select(rows, "bf16_gemm_nt", 128, INT64_MAX).empty()) {
    const GeoMeans g = geo_means(select(rows, "bf16_gemm_nt", 128, INT64_MAX));
    std::fprintf(out, "  BF16 M>=128: %s of bf16 peak (target 85%%), %s %s (target 1.0x) %s%s\n",
                 format_pct(g.pct_of_limit).c_str(), format_ratio(g.peer_ratio).c_str(), peer.c_str(),
                 verdict(g.pct_of_limit, 85, g.peer_ratio, 1.0), start_note(g).c_str());
  }
  if (!select(rows, "fp8_gemm_nt", 128, INT64_MAX).empty()) {
    const GeoMeans g = geo_means(select(rows, "fp8_gemm_nt", 128, INT64_MAX));
    std::fprintf(out,
                 "  FP8 (1,128)x(128,128) M>=128: %s of bf16 peak (target 80%%), %s dequant+%s (target 1.3x) "
                 "%s%s\n",
                 format_pct(g.pct_of_limit).c_str(), format_ratio(g.peer_ratio).c_str(), peer.c_str(),
                 verdict(g.pct_of_limit, 80, g.peer_ratio, 1.3), start_note(g).c_str());
  }
  if (!select(rows, "fp8_gemm_nt", 1, kGemmDecodeMaxM).empty()) {
    const GeoMeans g = geo_means(select(rows, "fp8_gemm_nt", 1, kGemmDecodeMaxM));
    const double ratio = decode_ratio_vs_onednn_bf16(rows);
    std::fprintf(out,
                 "  Decode M in {1,4}: %s of DRAM read counting FP8 weight bytes (target 80%%), %s %s GEMV "
                 "(target 1.6x) %s%s; %s\n",
                 format_pct(g.pct_of_limit).c_str(), format_ratio(ratio).c_str(),
                 (peer == "oneDNN" ? "oneDNN bf16" : peer).c_str(), verdict(g.pct_of_limit, 80, ratio, 1.6),
                 start_note(g).c_str(), roofline_note(select(rows, "fp8_gemm_nt", 1, kGemmDecodeMaxM)).c_str());
  }
  if (const Row* kernel = kernel_ceiling_row(rows)) {
    std::fprintf(out,
                 "  kernel alone (%s, packed panels in L2, kc=%lld): %s of bf16 peak; the M>=128 rows reach %s (bf16) "
                 "and %s (fp8) of it\n",
                 kernel->op.c_str(), (long long)kernel->k, format_pct(kernel->pct_of_limit).c_str(),
                 pct_of_kernel(rows, "bf16_gemm_nt", *kernel).c_str(),
                 pct_of_kernel(rows, "fp8_gemm_nt", *kernel).c_str());
  }
}

}  // namespace tessera::bench
