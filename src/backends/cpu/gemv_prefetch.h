// Software prefetch of the weight rows of the portable decode GEMVs (hwy/gemv.cc, gemv_fp4.cc,
// gemv_e4m3_planes-inl.h): how far ahead, and into which cache level.
#pragma once

#include <stdint.h>

namespace tessera::cpu {

// Bytes of weights between the block being read and the one being fetched: further than the DRAM
// latency at a core's share of the bandwidth, near enough to stay in L2.
constexpr int64_t kGemvPrefetchBytes = 8192;

// One line of weights into L2 (prefetcht1 on x86, a keep-in-L2 hint on ARM). Fetching into L1 filled
// the L1 miss buffers and stalled the loop (Zen 4, two threads from DRAM: bf16 and fp8 GEMVs at M = 1
// 1.2-2x faster with L2); kernels bound by their arithmetic rather than by memory may still prefer L1.
inline void prefetch_weights_l2(const void* line) {
  __builtin_prefetch(line, 0, 2);
}
inline void prefetch_weights_l1(const void* line) {
  __builtin_prefetch(line, 0, 3);
}

}  // namespace tessera::cpu
