// tessera/info.h - this machine's measured limits: the denominators of every "percent of limit" figure.
//
// Measured in-process, never assumed: peak fp32 FMA and bf16 dot-product rates (register-only loops on
// >= 16 independent accumulators, one thread and every pool thread at once), DRAM read and copy
// bandwidth (a pre-faulted buffer >= 8x the L3 size) and L2-resident copy bandwidth. Each figure is
// the median of several repetitions; the whole measurement takes a few seconds.
//
// Conventions: GFLOP/s and GB/s are 1e9 per second. A copy of B bytes counts 2*B (bytes read + bytes
// written), like STREAM's copy. DRAM copies use non-temporal stores (as large memcpy implementations
// do); L2 copies use ordinary stores. "All threads" figures use tessera::num_threads() threads.
//
// The limits are those of the active ISA level (TESSERA_ISA caps it): under TESSERA_ISA=avx2 the fp32
// peak is the ymm FMA rate and there is no bf16 instruction, as on an AVX2-only CPU.
//
// Results are cached as one JSON file per key (CPU model, logical CPU count, thread count, tessera
// version, ISA level) in $XDG_CACHE_HOME/tessera, else ~/.cache/tessera.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct MachineLimits {
  // ---- the cache key ----
  std::string cpu_model;
  int logical_cpus = 0;
  int threads = 0;  // pool threads the all-thread figures used
  std::string version;
  std::string isa;  // the active level the limits were measured at ("amx", "avx2", ...)

  // ---- detected facts (not measured) ----
  int64_t l2_bytes = 0;  // per core
  int64_t l3_bytes = 0;  // shared (what this process sees; sysfs on Linux)

  // ---- compute peaks, GFLOP/s (an FMA counts 2 flops) ----
  double fp32_peak_gflops_1t = 0, fp32_peak_gflops = 0;
  double bf16_peak_gflops_1t = 0, bf16_peak_gflops = 0;
  bool bf16_native = false;  // false: no AVX512_BF16, the bf16 figures repeat the fp32 rate
  // The bf16 peak is the best bf16 product instruction the CPU has: AMX tiles (tdpbf16ps) where
  // present, else vdpbf16ps. The vector rate (vdpbf16ps) is also kept on its own: on an AMX machine it
  // is what vector-only kernels (attention, GEMV) can reach. Equal to the bf16 peak without AMX.
  double bf16_vector_peak_gflops_1t = 0, bf16_vector_peak_gflops = 0;
  std::string fp32_kernel, bf16_kernel, stream_kernel;  // which loops measured them (e.g. "avx512")

  // ---- bandwidths, GB/s ----
  double dram_read_gbps_1t = 0, dram_read_gbps = 0;
  double dram_copy_gbps_1t = 0, dram_copy_gbps = 0;  // bytes read + bytes written
  double l2_copy_gbps_1t = 0, l2_copy_gbps = 0;      // bytes read + bytes written
  // Process-to-process shared-memory copy bandwidth; 0 = not measured (measured by the ep component
  // once it exists).
  double shm_copy_gbps = 0;

  // ---- provenance ----
  double measure_seconds = 0;  // how long the measurement took
  int64_t measured_unix_time = 0;
  bool from_cache = false;  // true when this copy was read from the cache file
  std::string cache_file;   // where it is (or would be) cached; empty when no cache folder exists
};

// The limits for the current key (thread count included). The first call loads the cache file or
// measures and writes it; a cached file whose figures look disturbed (machine_limits_warnings) is
// measured again; refresh = true always measures and rewrites the cache. The reference stays
// valid; its contents change when a later call re-measures (refresh, or a different thread count).
// Thread-safe. Must not be called from inside a parallel region (it runs loops on every pool thread).
const MachineLimits& machine_limits(bool refresh = false);

// Measures now, without reading or writing the cache.
MachineLimits measure_machine_limits();

// The all-thread DRAM read bandwidth (GB/s), measured now with the loop behind dram_read_gbps (about
// 0.1 s; the buffer is allocated on the first call and kept). On a shared machine this figure drifts
// by up to 2x within minutes, so benchmarks measure it next to each memory-bound case. Must not be
// called from inside a parallel region.
double measure_dram_read_gbps();
// The same for the DRAM copy figure (dram_copy_gbps: bytes read + written, non-temporal stores).
double measure_dram_copy_gbps();
// The all-thread bf16 peak (GFLOP/s), measured now with the loop behind bf16_peak_gflops (AMX tiles
// where present, else vdpbf16ps, else fp32 FMA; about 0.2 s). On a shared host the tile rate moved
// 2x within minutes, so benchmarks measure it next to each compute-bound case. Must not be called
// from inside a parallel region.
double measure_bf16_peak_gflops();

// The bf16 GEMM's micro-kernel alone: the kernel set the packed bf16 GEMM takes here (amx, else
// avx512bf16; none below that) over packed random bf16 panels that stay in each thread's L2 (a
// rows x kc a-block and a cols x kc b-block per thread, kc the set's K block), called once per
// (a-panel, b-panel) pair in the driver's order with the fp32 workspace accumulating. What the GEMM
// reaches below it is lost to its packing, conversions, writing D and sharing work between threads;
// what it lacks of the bf16 peak is the kernel's own (its tile loads and C trips). One sweep from zero
// is checked against a float64 reference first. Then `rounds` times: the kernel's all-thread rate,
// then the bf16 peak (measure_bf16_peak_gflops), since on a shared host either moves 2x within
// seconds and only a pair measured together gives a ratio. About 0.4 s per round; must not be called
// inside a parallel region.
struct GemmKernelCeiling {
  std::string kernel;  // the kernel set measured, empty when none was
  int64_t rows = 0, cols = 0, kc = 0;
  double gflops = 0;       // all threads, median over the rounds
  double peak_gflops = 0;  // the bf16 peak measured after each round, median
  double pct_of_peak = 0;  // per round 100 * kernel / peak, median
  double max_rel_err = 0;  // the check: largest |error| over largest |reference|
};
GemmKernelCeiling measure_gemm_kernel_ceiling(int rounds = 5);

// The cache file for the current key, and the read of it: false when it is missing, unreadable,
// malformed or written for another key.
std::string machine_limits_cache_file();
bool load_cached_machine_limits(MachineLimits* out);

// One flat JSON object holding every field above (the cache file format), and its inverse; the
// inverse returns false on malformed text or missing fields.
std::string machine_limits_to_json(const MachineLimits& limits);
bool machine_limits_from_json(const std::string& text, MachineLimits* out);

// Signs that the measurement was disturbed (other processes using the CPUs): all-thread compute
// rates well below threads x the 1-thread rate, or all-thread figures below the 1-thread ones. Empty
// when the figures look consistent; each entry is one sentence.
std::vector<std::string> machine_limits_warnings(const MachineLimits& limits);

// The kernel registry as a table: one line per kernel slot, one column per ISA level (amx .. scalar),
// naming the implementation that level runs (`tessera info --kernels`).
std::string kernel_registry_matrix();

// The version string of this build ("0.1.0").
const char* tessera_version();

}  // namespace tessera
