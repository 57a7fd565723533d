// `tessera info`: CPU, ISA features, active ISA, thread count and the measured limits.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "commands.h"
#include "json_writer.h"
#include "tessera/core/cpu.h"
#include "tessera/ep/shm_bandwidth.h"
#include "tessera/info.h"

namespace tessera::cli {
namespace {

constexpr const char* kHelp =
    "usage: tessera info [--json] [--refresh] [--kernels]\n"
    "\n"
    "Prints the CPU model, its ISA features, the ISA tessera's kernels use (TESSERA_ISA caps it), the\n"
    "thread count (TESSERA_NUM_THREADS sets it) and this machine's measured limits, for 1 thread and all\n"
    "threads: peak fp32 FMA and bf16 dot-product GFLOP/s, DRAM read and copy GB/s and L2 copy GB/s.\n"
    "A copy of B bytes counts 2*B (read + written), like STREAM. The limits are cached per CPU model,\n"
    "CPU count, thread count and version under $XDG_CACHE_HOME/tessera (else ~/.cache/tessera).\n"
    "\n"
    "  --json     one JSON object (all-thread figures unsuffixed, 1-thread figures with _1t)\n"
    "  --refresh  measure again and rewrite the cache\n"
    "  --kernels  the kernel registry: for every kernel slot, the implementation each ISA level gets\n"
    "             (without measuring anything); a scalar entry under a SIMD level is a slow path\n";

std::string when(int64_t unix_time) {
  const std::time_t t = std::time_t(unix_time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

void print_json(const MachineLimits& m) {
  bench::JsonObject o;
  o.add("cpu_model", m.cpu_model).add("features", cpu_feature_string()).add("isa", isa_name(active_isa()));
  o.add("best_isa", isa_name(cpu_features().best)).add("threads", m.threads).add("logical_cpus", m.logical_cpus);
  o.add("version", m.version).add("l2_bytes", m.l2_bytes).add("l3_bytes", m.l3_bytes);
  o.add("fp32_peak_gflops", m.fp32_peak_gflops).add("fp32_peak_gflops_1t", m.fp32_peak_gflops_1t);
  o.add("bf16_peak_gflops", m.bf16_peak_gflops).add("bf16_peak_gflops_1t", m.bf16_peak_gflops_1t);
  o.add("bf16_native", m.bf16_native);
  o.add("bf16_vector_peak_gflops", m.bf16_vector_peak_gflops)
      .add("bf16_vector_peak_gflops_1t", m.bf16_vector_peak_gflops_1t);
  o.add("dram_read_gbps", m.dram_read_gbps).add("dram_read_gbps_1t", m.dram_read_gbps_1t);
  o.add("dram_copy_gbps", m.dram_copy_gbps).add("dram_copy_gbps_1t", m.dram_copy_gbps_1t);
  o.add("l2_copy_gbps", m.l2_copy_gbps).add("l2_copy_gbps_1t", m.l2_copy_gbps_1t);
  if (m.shm_copy_gbps > 0) {
    o.add("shm_copy_gbps", m.shm_copy_gbps);
  } else {
    o.add_null("shm_copy_gbps");
  }
  o.add("fp32_kernel", m.fp32_kernel).add("bf16_kernel", m.bf16_kernel).add("stream_kernel", m.stream_kernel);
  o.add("measure_seconds", m.measure_seconds).add("measured_unix_time", m.measured_unix_time);
  o.add("from_cache", m.from_cache).add("cache_file", m.cache_file);
  std::printf("%s\n", o.str().c_str());
}

void print_text(const MachineLimits& m) {
  const CpuFeatures& f = cpu_features();
  std::printf("tessera %s\n", m.version.c_str());
  std::printf("cpu          %s (%s, %d logical CPUs; L2 %lld KiB per core, L3 %lld MiB)\n", m.cpu_model.c_str(),
              f.vendor.c_str(), m.logical_cpus, (long long)(m.l2_bytes >> 10), (long long)(m.l3_bytes >> 20));
  std::printf("features     %s\n", cpu_feature_string().c_str());
  std::printf("isa          %s (best available: %s)\n", isa_name(active_isa()), isa_name(f.best));
  std::printf("threads      %d\n", m.threads);
  std::printf("limits       %s %s, took %.1f s; cache %s\n", m.from_cache ? "cached, measured" : "measured now,",
              when(m.measured_unix_time).c_str(), m.measure_seconds,
              m.cache_file.empty() ? "(none: no writable cache folder)" : m.cache_file.c_str());
  std::printf("\n  %-16s %-8s %10s %10s   %s\n", "limit", "unit", "1 thread", "all", "how");
  auto line = [](const char* name, const char* unit, double one, double all, const std::string& how) {
    std::printf("  %-16s %-8s %10.1f %10.1f   %s\n", name, unit, one, all, how.c_str());
  };
  line("fp32 FMA peak", "GFLOP/s", m.fp32_peak_gflops_1t, m.fp32_peak_gflops, m.fp32_kernel);
  line("bf16 peak", "GFLOP/s", m.bf16_peak_gflops_1t, m.bf16_peak_gflops, m.bf16_kernel);
  if (m.bf16_vector_peak_gflops != m.bf16_peak_gflops)
    line("bf16 vector", "GFLOP/s", m.bf16_vector_peak_gflops_1t, m.bf16_vector_peak_gflops, "avx512bf16 vdpbf16ps zmm");
  line("DRAM read", "GB/s", m.dram_read_gbps_1t, m.dram_read_gbps, m.stream_kernel + " loads, buffer >= 8x L3");
  line("DRAM copy", "GB/s", m.dram_copy_gbps_1t, m.dram_copy_gbps, "read + written bytes, non-temporal stores");
  line("L2 copy", "GB/s", m.l2_copy_gbps_1t, m.l2_copy_gbps, "read + written bytes, 256 KiB per thread");
  if (m.shm_copy_gbps > 0) {
    std::printf("  %-16s %-8s %10s %10.1f   %s\n", "shm copy", "GB/s", "", m.shm_copy_gbps, "process to process");
  } else {
    std::printf("  %-16s %-8s %10s %10s   %s\n", "shm copy", "GB/s", "n/a", "n/a", "not measured yet");
  }
  std::printf("\n'all' = %d threads running at once; every figure is a median of repeated runs.\n", m.threads);
}

}  // namespace

int run_info(int argc, char** argv) {
  bool json = false, refresh = false, kernels = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else if (!std::strcmp(argv[i], "--refresh")) {
      refresh = true;
    } else if (!std::strcmp(argv[i], "--kernels")) {
      kernels = true;
    } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf("%s", kHelp);
      return kExitOk;
    } else {
      std::fprintf(stderr, "tessera info: unknown option '%s'\n\n%s", argv[i], kHelp);
      return kExitUsage;
    }
  }
  if (kernels) {
    std::printf("%s", kernel_registry_matrix().c_str());
    std::printf(
        "\nThis CPU runs level %s (best available: %s); a level above it names what a CPU with it "
        "would run.\nTESSERA_VERBOSE_DISPATCH=1 prints each call's choice and every refusal.\n",
        isa_name(active_isa()), isa_name(cpu_features().best));
    return kExitOk;
  }
  MachineLimits m = machine_limits(refresh);
  // Two processes copying into each other's shared memory (measured by the ep component, not cached).
  if (m.shm_copy_gbps <= 0) m.shm_copy_gbps = ep::measure_shm_copy_gbps();
  for (const std::string& w : machine_limits_warnings(m))
    std::fprintf(stderr, "tessera info: warning: %s\n", w.c_str());
  if (json) {
    print_json(m);
  } else {
    print_text(m);
  }
  return kExitOk;
}

}  // namespace tessera::cli
