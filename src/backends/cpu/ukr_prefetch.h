// The micro-kernels' share of the driver's prefetching (UkrArgs::pf_*): the lines a later call will
// read, issued a few at a time through the K loop. A burst of a panel's few hundred prefetches before a
// call was mostly dropped: lines read back almost as slowly as without a prefetch.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#pragma once

#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
// Internal linkage: every kernel file compiles its own copy with its own ISA flags
// (backends/cpu/README.md rule 1; member functions defined in a class are inline with external
// linkage otherwise, and the linker would keep one file's copy for all).
namespace {

// Walks lines [pf_begin, pf_end) of UkrArgs' prefetch block in order. The position is kept as a row
// pointer and a line within the row, so issuing a line costs an add and a compare. Computing it from
// the line index took a division and a multiply per line, a visible share of a tile's time.
struct UkrPrefetcher {
  int per_step = 0;  // lines per step of 32 K values (16 bf16 pairs), so a call's share spans its K loop
  int left = 0;      // lines not yet issued

  explicit UkrPrefetcher(const UkrArgs& p) {
    if (p.pf_end <= p.pf_begin) return;
    const int steps = (p.kc + 31) / 32;
    left = p.pf_end - p.pf_begin;
    per_step = (left + steps - 1) / steps;
    line_in_row_ = p.pf_begin % p.pf_row_lines;
    next_ = p.pf_base + int64_t(p.pf_begin / p.pf_row_lines) * p.pf_row_stride + line_in_row_ * 64;
  }

  // Issues up to `count` more lines into L1 (T0): the next a-panel's source is read once, by its
  // conversion, right after this call; from L2 the fp8 conversion of a 14 x 1024 panel ran at ~9 cycles
  // per 64 bytes instead of ~6 (2 threads, M=128 fp8, weights from DRAM: N=4096 K=7168 835 -> 852
  // GFLOP/s, N=24576 K=1536 820 -> 869, L3-resident shapes unchanged). Only the position stays live
  // across the K loop; the row geometry is read from p at a row's end.
  __attribute__((always_inline)) void run(const UkrArgs& p, int count) {
    for (int i = 0; i < count && left > 0; ++i, --left) {
      __builtin_prefetch(next_, 0, 3);
      if (++line_in_row_ < p.pf_row_lines) {
        next_ += 64;
      } else {
        line_in_row_ = 0;
        next_ += p.pf_row_stride - int64_t(p.pf_row_lines - 1) * 64;
      }
    }
  }

 private:
  const char* next_ = nullptr;  // the next line to issue
  int line_in_row_ = 0;
};

}  // namespace
}  // namespace tessera::cpu
