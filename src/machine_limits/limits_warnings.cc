// Consistency checks on measured limits. Compute peaks scale with cores (nothing is shared), so an
// all-thread rate far below threads x the 1-thread rate means some core was busy with something else.
#include <cstdio>

#include "tessera/info.h"

namespace tessera {
namespace {

constexpr double kMinComputeScaling = 0.75;  // of perfect scaling
constexpr double kMinAllOverOne = 0.9;       // all threads may share a bus, but never lose much

std::string sentence(const char* format, const char* what, double a, double b) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, what, a, b);
  return buf;
}

}  // namespace

std::vector<std::string> machine_limits_warnings(const MachineLimits& m) {
  std::vector<std::string> out;
  const struct {
    const char* name;
    double one, all;
    bool compute;
  } figures[] = {
      {"fp32 peak", m.fp32_peak_gflops_1t, m.fp32_peak_gflops, true},
      {"bf16 peak", m.bf16_peak_gflops_1t, m.bf16_peak_gflops, true},
      {"DRAM read", m.dram_read_gbps_1t, m.dram_read_gbps, false},
      {"DRAM copy", m.dram_copy_gbps_1t, m.dram_copy_gbps, false},
      {"L2 copy", m.l2_copy_gbps_1t, m.l2_copy_gbps, false},
  };
  for (const auto& f : figures) {
    if (f.compute && m.threads > 1 && f.all < kMinComputeScaling * m.threads * f.one) {
      out.push_back(
          sentence("%s: all threads reach %.1f, below %.1f (75%% of threads x 1 thread); other processes "
                   "were probably using the CPUs - measure again with `tessera info --refresh`",
                   f.name, f.all, kMinComputeScaling * m.threads * f.one));
    } else if (!f.compute && f.all < kMinAllOverOne * f.one) {
      out.push_back(
          sentence("%s: all threads reach %.1f, less than 1 thread's %.1f; other processes were probably "
                   "using the CPUs - measure again with `tessera info --refresh`",
                   f.name, f.all, f.one));
    }
  }
  return out;
}

}  // namespace tessera
