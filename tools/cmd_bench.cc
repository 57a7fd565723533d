// `tessera bench [component] [--json] [--full] [--threads N] [--cached-limits]`.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench.h"
#include "commands.h"
#include "peers/onednn_matmul.h"
#include "peers/openblas_sgemm.h"
#include "quick_scale.h"
#include "tessera/core/cpu.h"
#include "tessera/core/thread_pool.h"
#include "tessera/core/timer.h"
#include "tessera/info.h"
#include "timing.h"

namespace tessera::cli {
namespace {

// Timed calls per implementation and case in the quick suite (--full: 0.3 s, at least 5): with about
// 100 cases and up to three implementations each, this keeps the quick run under 3 minutes on two cores.
constexpr double kQuickTimingBudgetSeconds = 0.15;
constexpr int kQuickMinSamples = 3;

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera bench [component] [--json] [--full] [--threads N] [--cached-limits]\n"
               "\n"
               "Runs benchmarks of tessera against peer libraries in the same process and prints one row per case\n"
               "(time, GFLOP/s, GB/s, percent of this machine's measured limit, ratio to each peer), then\n"
               "geometric means and the project's targets. Without a component: every component's quick suite.\n"
               "Progress goes to stderr; the exit code is 1 when any case failed its result check (a peer\n"
               "that fails or refuses this CPU costs only its own columns).\n"
               "\n"
               "Quick runs size their compute-bound cases by this machine: a bf16 GEMM probe at the active ISA\n"
               "level below 600 GFLOP/s scales them down (fewer large-M GEMMs, fewer rows and requests), so a\n"
               "slow level runs smaller problems rather than taking longer. Peers: oneDNN is capped at the\n"
               "TESSERA_ISA level; where it refuses bf16 matmul it runs fp32 matmul on operands converted per\n"
               "call, shown as oneDNN-fp32. OpenBLAS (the GEMM suite's second peer) loads the kernels of the\n"
               "same level (OPENBLAS_CORETYPE, unless set). The report's first lines say which.\n"
               "\n"
               "components:\n");
  for (const bench::Component& c : bench::components()) std::fprintf(out, "  %-8s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\n"
               "  --json       print one JSON array of rows instead of the table\n"
               "  --full       every case, not the quick subset\n"
               "  --threads N  threads for tessera and the peers (default: all, or TESSERA_NUM_THREADS)\n"
               "  --cached-limits  take the limits from `tessera info`'s cache instead of measuring them at the\n"
               "               start of the run (DRAM bandwidth on a shared machine drifts by 2x within hours,\n"
               "               so percentages are computed against limits measured in the same run by default;\n"
               "               `bench ep` always uses the cache: its ranks share the machine)\n"
               "\n"
               "`tessera bench <component> --help` describes a component's cases and columns.\n");
}

bool parse_threads(const char* text, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 4096) return false;
  *out = int(v);
  return true;
}

}  // namespace

int run_bench(int argc, char** argv) {
  bool json = false, full = false, help = false, cached_limits = false;
  int threads = 0;
  const bench::Component* only = nullptr;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!std::strcmp(a, "--json")) {
      json = true;
    } else if (!std::strcmp(a, "--cached-limits")) {
      cached_limits = true;
    } else if (!std::strcmp(a, "--full")) {
      full = true;
    } else if (!std::strcmp(a, "--help") || !std::strcmp(a, "-h")) {
      help = true;
    } else if (!std::strcmp(a, "--threads")) {
      if (i + 1 >= argc || !parse_threads(argv[i + 1], &threads)) {
        std::fprintf(stderr, "tessera bench: --threads needs a whole number >= 1\n\n");
        usage(stderr);
        return kExitUsage;
      }
      ++i;
    } else if (a[0] != '-' && !only) {
      only = bench::find_component(a);
      if (!only) {
        std::fprintf(stderr, "tessera bench: unknown component '%s'\n\n", a);
        usage(stderr);
        return kExitUsage;
      }
    } else {
      std::fprintf(stderr, "tessera bench: unexpected argument '%s'\n\n", a);
      usage(stderr);
      return kExitUsage;
    }
  }
  if (help) {
    if (only) {
      std::printf("%s", only->help);
    } else {
      usage(stdout);
    }
    return kExitOk;
  }

  if (threads > 0) set_num_threads(threads);
  // Same-run limits: the percentages then compare figures measured minutes apart, not days.
  const bool refresh = !cached_limits && !(only && !std::strcmp(only->name, "ep"));
  if (refresh) std::fprintf(stderr, "[bench] measuring this machine's limits (about 1 s; --cached-limits skips)\n");
  const MachineLimits& limits = machine_limits(refresh);
  for (const std::string& w : machine_limits_warnings(limits))
    std::fprintf(stderr, "tessera bench: warning: machine limits: %s\n", w.c_str());
  // Before any peer runs: says which oneDNN runs, at which ISA cap, and whether bf16 or the fp32 fallback.
  const std::string peer_line = bench::OnednnMatmul::description();
  std::fprintf(stderr, "[bench] peer: %s\n", peer_line.c_str());
  // The GEMM suite's second peer, loaded only when that suite runs.
  const std::string blas_line = !only || !std::strcmp(only->name, "gemm") ? bench::openblas_description() : "";
  if (!blas_line.empty()) std::fprintf(stderr, "[bench] second peer: %s\n", blas_line.c_str());
  bench::Options options;
  options.full = full;
  options.threads = num_threads();
  double probe = 0;
  if (!full) {
    bench::set_timing_defaults(kQuickTimingBudgetSeconds, kQuickMinSamples);
    probe = bench::probe_gemm_gflops();
    options.quick_scale = bench::quick_scale_for(probe, full);
    std::fprintf(stderr, "[bench] quick sizes: bf16 GEMM probe %.0f GFLOP/s at level %s -> scale %.2f%s\n", probe,
                 isa_name(active_isa()), options.quick_scale,
                 options.quick_scale < 1 ? " (compute-bound cases shrink; --full runs the listed sizes)" : "");
  }

  std::vector<bench::Row> rows;
  const int64_t run_start = now_ns();
  for (const bench::Component& c : bench::components()) {
    if (only && only != &c) continue;
    const int64_t start = now_ns();
    std::vector<bench::Row> part = c.run(options, limits);
    std::fprintf(stderr, "[bench] %s: %zu rows in %.1f s\n", c.name, part.size(), double(now_ns() - start) * 1e-9);
    rows.insert(rows.end(), part.begin(), part.end());
  }
  std::fprintf(stderr, "[bench] all components in %.1f s\n", double(now_ns() - run_start) * 1e-9);

  if (json) {
    bench::print_json(stdout, rows);
  } else {
    std::printf(
        "tessera %s bench on %s, %d threads; limits: bf16 peak %.1f GFLOP/s, DRAM read %.1f GB/s "
        "(%s)\n\n",
        limits.version.c_str(), limits.cpu_model.c_str(), options.threads, limits.bf16_peak_gflops,
        limits.dram_read_gbps, refresh ? "measured at the start of this run" : "tessera info cache");
    std::printf("peer: %s\n", peer_line.c_str());
    if (!blas_line.empty()) std::printf("second peer: %s\n", blas_line.c_str());
    if (options.quick_scale < 1)
      std::printf("quick sizes scaled by %.2f for level %s (bf16 GEMM probe %.0f GFLOP/s; see tessera bench --help)\n",
                  options.quick_scale, isa_name(active_isa()), probe);
    std::printf("\n");
    bench::print_table(stdout, rows);
    bench::print_summary(stdout, rows);
  }
  int failed = 0;
  for (const bench::Row& r : rows) failed += !r.ok();
  if (failed) std::fprintf(stderr, "tessera bench: %d case(s) failed; see the status column\n", failed);
  return failed ? kExitFailure : kExitOk;
}

}  // namespace tessera::cli
