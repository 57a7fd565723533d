// The micro-kernels' share of the driver's prefetching (UkrArgs::pf_*): the lines a later call will
// read, issued a few at a time through the K loop. A burst of a panel's few hundred prefetches before a
// call was mostly dropped (measured: 224 lines 7 KiB apart per row read back at ~7 cycles per line
// after a burst, ~0.7 when issued 16 at a time).
#pragma once

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {

// Lines to issue per step of 32 K values (16 bf16 pairs) so a call's share spans its K loop.
static inline int ukr_prefetch_per_step(const UkrArgs& p) {
  if (p.pf_end <= p.pf_begin) return 0;
  const int steps = (p.kc + 31) / 32;
  return (p.pf_end - p.pf_begin + steps - 1) / steps;
}

// Issues up to `count` more lines; *next (starting at p.pf_begin) tracks progress. Into L1 (T0): the
// next a-panel's source is read once, by its conversion, right after this call; from L2 the fp8
// conversion of a 14 x 1024 panel ran at ~9 cycles per 64 bytes instead of ~6 (2 threads, M=128 fp8,
// weights from DRAM: N=4096 K=7168 835 -> 852 GFLOP/s, N=24576 K=1536 820 -> 869, L3-resident shapes
// unchanged).
static inline void ukr_prefetch_lines(const UkrArgs& p, int count, int* next) {
  for (int i = 0; i < count && *next < p.pf_end; ++i, ++*next) {
    const char* line = p.pf_base + int64_t(*next / p.pf_row_lines) * p.pf_row_stride + (*next % p.pf_row_lines) * 64;
    __builtin_prefetch(line, 0, 3);
  }
}

}  // namespace tessera::cpu
