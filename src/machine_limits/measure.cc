// measure_machine_limits(): peak compute rates and memory bandwidths, measured on this machine now.
//
// Every figure is the median of info::kRateReps timed repetitions. A multi-thread repetition starts all threads
// at a barrier and is timed from the first start to the last end, so stragglers count against it.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "machine_limits/peak_loops.h"
#include "machine_limits/timed_rate.h"
#include "tessera/core/cpu.h"
#include "tessera/core/error.h"
#include "tessera/core/memory.h"
#include "tessera/core/thread_pool.h"
#include "tessera/core/timer.h"
#include "tessera/info.h"

namespace tessera {
namespace {

using info::median_rate;
using info::timed_rate;

constexpr double kComputeRepSeconds = 0.02;
constexpr double kBandwidthRepSeconds = 0.01;
constexpr int64_t kMiB = 1 << 20;

// ---- compute peaks ----

// Iterations of `fn` that take about kComputeRepSeconds on one thread (doubling until a run is long
// enough to time, which also warms the core up to its sustained clock).
int64_t calibrate_iters(cpu::ComputePeakFn fn, float* sink) {
  int64_t iters = 1024;
  for (;;) {
    *sink = 1.0f;
    const int64_t t0 = now_ns();
    fn(iters, sink);
    const double seconds = double(now_ns() - t0) * 1e-9;
    if (seconds > 0.004) return std::max<int64_t>(1, int64_t(double(iters) * kComputeRepSeconds / seconds));
    iters *= 2;
  }
}

void measure_compute(cpu::ComputePeakFn fn, int threads, double* gflops_1t, double* gflops_all) {
  // One cache line per thread; reset to 1 before each run so the loops' operands never grow.
  std::vector<float> sinks(static_cast<size_t>(threads) * 16, 1.0f);
  const int64_t iters = calibrate_iters(fn, sinks.data());
  auto body = [&](int t, int) {
    float* sink = &sinks[size_t(t) * 16];
    *sink = 1.0f;
    return fn(iters, sink);
  };
  if (gflops_1t) *gflops_1t = median_rate(1, body) * 1e-9;  // null: the all-thread figure only
  *gflops_all = median_rate(threads, body) * 1e-9;
}

// ---- bandwidth ----

// [begin, end) of thread t's share of n floats, in whole stream blocks.
void share(int64_t n, int t, int nt, int64_t* begin, int64_t* end) {
  const int64_t blocks = n / cpu::kStreamBlockFloats;
  *begin = blocks * t / nt * cpu::kStreamBlockFloats;
  *end = blocks * (t + 1) / nt * cpu::kStreamBlockFloats;
}

struct BandwidthBuffers {
  AlignedPtr<float> dram;  // >= 8x L3, filled (so pre-faulted) with non-zero values
  int64_t dram_floats = 0;
  AlignedPtr<float> l2;  // per thread: l2_floats source values, then l2_floats destination values
  int64_t l2_floats = 0;
};

// The DRAM buffer alone (what measure_dram_read_gbps needs).
void make_dram_buffer(int64_t l3_bytes, BandwidthBuffers* out) {
  BandwidthBuffers& b = *out;
  const int64_t dram_bytes = std::clamp<int64_t>(8 * l3_bytes, 64 * kMiB, 1024 * kMiB);
  b.dram_floats = dram_bytes / 4 / (2 * cpu::kStreamBlockFloats) * (2 * cpu::kStreamBlockFloats);
  b.dram = aligned_array<float>(size_t(b.dram_floats));
  float* dram = b.dram.get();
  parallel_for(b.dram_floats, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dram[i] = 1.0f + float(i & 1023) * 1e-3f;
  });
}

BandwidthBuffers make_buffers(int64_t l2_bytes, int64_t l3_bytes, int threads) {
  BandwidthBuffers b;
  make_dram_buffer(l3_bytes, &b);
  // Source + destination = 256 KiB per thread, or half the L2 on CPUs with small L2 caches.
  const int64_t pair_bytes = std::min<int64_t>(256 * 1024, l2_bytes / 2);
  b.l2_floats =
      std::max<int64_t>(cpu::kStreamBlockFloats, pair_bytes / 8 / cpu::kStreamBlockFloats * cpu::kStreamBlockFloats);
  b.l2 = aligned_array<float>(size_t(threads) * 2 * b.l2_floats);
  std::fill_n(b.l2.get(), size_t(threads) * 2 * b.l2_floats, 0.5f);
  return b;
}

// Thread t's share of the DRAM read; returns the bytes it read.
double read_share(const cpu::StreamKernels& k, const BandwidthBuffers& b, int t, int nt, std::vector<float>* sinks) {
  int64_t i0, i1;
  share(b.dram_floats, t, nt, &i0, &i1);
  (*sinks)[size_t(t) * 16] += k.read_sum(b.dram.get() + i0, i1 - i0);
  return double(i1 - i0) * 4;
}

// Thread t's share of copying the first half of the DRAM buffer into the second half (each half is
// >= 4x L3); returns the bytes it read + wrote.
double copy_share(const cpu::StreamKernels& k, const BandwidthBuffers& b, int t, int nt) {
  const int64_t half = b.dram_floats / 2;
  int64_t i0, i1;
  share(half, t, nt, &i0, &i1);
  k.copy(b.dram.get() + half + i0, b.dram.get() + i0, i1 - i0, 1);
  return double(i1 - i0) * 8;
}

void measure_bandwidth(const cpu::StreamKernels& k, BandwidthBuffers& b, int threads, MachineLimits* m) {
  std::vector<float> sinks(static_cast<size_t>(threads) * 16, 0.0f);

  auto read = [&](int t, int nt) { return read_share(k, b, t, nt, &sinks); };
  m->dram_read_gbps_1t = median_rate(1, read) * 1e-9;
  m->dram_read_gbps = median_rate(threads, read) * 1e-9;

  auto dram_copy = [&](int t, int nt) { return copy_share(k, b, t, nt); };
  m->dram_copy_gbps_1t = median_rate(1, dram_copy) * 1e-9;
  m->dram_copy_gbps = median_rate(threads, dram_copy) * 1e-9;

  // L2: each thread copies its own source into its own destination, `rounds` times per repetition.
  const int64_t n = b.l2_floats;
  int64_t rounds = 16;
  auto l2_copy = [&](int t, int) {
    float* src = b.l2.get() + size_t(t) * 2 * n;
    for (int64_t r = 0; r < rounds; ++r) k.copy(src + n, src, n, 0);
    return double(rounds) * double(n) * 8;
  };
  const double probe = timed_rate(1, l2_copy);  // also brings the buffers into L2
  rounds = std::max<int64_t>(16, int64_t(probe * kBandwidthRepSeconds / (double(n) * 8)));
  m->l2_copy_gbps_1t = median_rate(1, l2_copy) * 1e-9;
  m->l2_copy_gbps = median_rate(threads, l2_copy) * 1e-9;
}

}  // namespace

namespace {

// One DRAM figure measured now on the pool's threads: share(kernels, buffers, t, nt) returns bytes.
template <class Share>
double measure_dram_now(const char* fn, Share share) {
  TESSERA_CHECK(!in_parallel_region(), fn, ": must not be called inside a parallel region");
  static std::mutex mutex;
  static BandwidthBuffers buffers;
  std::lock_guard<std::mutex> lock(mutex);
  const info::PeakLoops loops = info::select_peak_loops();
  if (!buffers.dram) make_dram_buffer(cpu_features().l3_bytes, &buffers);
  return median_rate(num_threads(), [&](int t, int nt) { return share(*loops.stream, buffers, t, nt); }) * 1e-9;
}

}  // namespace

double measure_dram_read_gbps() {
  std::vector<float> sinks(static_cast<size_t>(num_threads()) * 16, 0.0f);
  return measure_dram_now("measure_dram_read_gbps", [&](const cpu::StreamKernels& k, BandwidthBuffers& b, int t,
                                                        int nt) { return read_share(k, b, t, nt, &sinks); });
}

double measure_dram_copy_gbps() {
  return measure_dram_now("measure_dram_copy_gbps", [](const cpu::StreamKernels& k, BandwidthBuffers& b, int t,
                                                       int nt) { return copy_share(k, b, t, nt); });
}

double measure_bf16_peak_gflops() {
  TESSERA_CHECK(!in_parallel_region(), "measure_bf16_peak_gflops: must not be called inside a parallel region");
  const info::PeakLoops loops = info::select_peak_loops();
  double gflops = 0;
  measure_compute(loops.bf16_peak(), num_threads(), nullptr, &gflops);
  return gflops;
}

MachineLimits measure_machine_limits() {
  const int64_t t0 = now_ns();
  const CpuFeatures& f = cpu_features();
  MachineLimits m;
  m.cpu_model = f.model_name.empty() ? std::string("unknown") : f.model_name;
  m.logical_cpus = f.logical_cpus;
  m.threads = num_threads();
  m.version = tessera_version();
  m.isa = isa_name(active_isa());
  m.l2_bytes = cpu_features().l2_bytes;
  m.l3_bytes = cpu_features().l3_bytes;

  const info::PeakLoops loops = info::select_peak_loops();
  measure_compute(loops.f32_fma, m.threads, &m.fp32_peak_gflops_1t, &m.fp32_peak_gflops);
  m.fp32_kernel = loops.f32_name;
  if (loops.bf16_dot) {
    measure_compute(loops.bf16_dot, m.threads, &m.bf16_peak_gflops_1t, &m.bf16_peak_gflops);
    m.bf16_native = true;
    m.bf16_kernel = loops.bf16_name;
  } else {
    m.bf16_peak_gflops_1t = m.fp32_peak_gflops_1t;
    m.bf16_peak_gflops = m.fp32_peak_gflops;
    m.bf16_kernel = "none (no AVX512_BF16: fp32 FMA rate)";
  }
  m.bf16_vector_peak_gflops_1t = m.bf16_peak_gflops_1t;
  m.bf16_vector_peak_gflops = m.bf16_peak_gflops;
  if (loops.bf16_peak() == loops.bf16_amx) {  // else the vector figures above are the peak
    measure_compute(loops.bf16_amx, m.threads, &m.bf16_peak_gflops_1t, &m.bf16_peak_gflops);
    m.bf16_kernel = loops.bf16_amx_name;
  }

  BandwidthBuffers buffers = make_buffers(m.l2_bytes, m.l3_bytes, m.threads);
  measure_bandwidth(*loops.stream, buffers, m.threads, &m);
  m.stream_kernel = loops.stream->name;

  m.measure_seconds = double(now_ns() - t0) * 1e-9;
  m.measured_unix_time = int64_t(std::time(nullptr));
  return m;
}

}  // namespace tessera
