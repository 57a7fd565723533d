// Plain interface between the machine-limit measurements (src/machine_limits) and the per-ISA loops that find
// this CPU's peak rates (src/backends/cpu/<isa>/peak_*.cc). No inline functions or templates here:
// ISA translation units include this file (see README.md).
#pragma once

#include <cstdint>

namespace tessera::cpu {

// Runs `iters` iterations of a register-only loop (no memory operands inside the loop) on at least 16
// independent accumulators and returns the floating-point operations it executed (an FMA counts 2, a
// bf16 pair dot product 4). The accumulators are summed into *sink so the loop cannot be dropped.
using ComputePeakFn = double (*)(int64_t iters, float* sink);

// Streaming loops over float buffers whose length n is a multiple of kStreamBlockFloats.
//  read_sum: sums every element with vector loads into several independent accumulators, walking
//            kReadStreams parts of the range at once.
//  copy:     dst[i] = src[i]; streaming != 0 uses non-temporal stores (DRAM copies, like a large
//            memcpy), 0 uses ordinary stores (cache-resident copies).
constexpr int64_t kStreamBlockFloats = 256;  // 1 KiB: 16 zmm or 32 ymm per unrolled iteration
constexpr int kReadStreams = 4;              // read_sum walks this many parts of its range at once
struct StreamKernels {
  const char* name;
  float (*read_sum)(const float* src, int64_t n);
  void (*copy)(float* dst, const float* src, int64_t n, int streaming);
};

// Accessors; each is only called after cpu_features() reported the level (README rule 3).
ComputePeakFn peak_bf16_dot_avx512bf16();  // vdpbf16ps zmm
ComputePeakFn peak_bf16_amx();             // tdpbf16ps tiles (AMX)
ComputePeakFn peak_f32_fma_avx512();       // vfmadd231ps zmm
ComputePeakFn peak_f32_fma_avx2();         // vfmadd231ps ymm
const StreamKernels* stream_kernels_avx512();
const StreamKernels* stream_kernels_avx2();

}  // namespace tessera::cpu
