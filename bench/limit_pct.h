// A row's percent of this machine's limit. On a shared host the limits drift (DRAM read by up to 2x,
// the AMX tile rate by 2x-3.5x within minutes), so each row is compared with the figure measured right
// after it (pct_of_limit); the figure measured at the run's start gives pct_of_start_limit beside it.
#pragma once

#include <vector>

#include "bench.h"

namespace tessera::bench {

// A compute-bound row: row->gflops over the all-thread bf16 peak.
void set_bf16_peak_pct(Row* row, const MachineLimits& start);
// A memory-bound row that moves `gbps` of counted bytes: over the DRAM read bandwidth.
void set_dram_read_pct(Row* row, double gbps, const MachineLimits& start);
// A row that reads and writes `gbps` of counted bytes: over the DRAM copy bandwidth.
void set_dram_copy_pct(Row* row, double gbps, const MachineLimits& start);

// A decode row's roofline, called after set_dram_read_pct: the DRAM read figure, or where lower the
// weight bytes per second the level's product peak allows at `flops_per_weight_byte` (2 M N K over the
// counted weight bytes). At avx2 and avx512 the decode GEMVs run fp32 FMAs, whose peak can bind before
// DRAM does (FP4 or e4m3 weights with several activation rows). Sets row->pct_ceiling (100: DRAM binds).
void set_decode_ceiling(Row* row, double flops_per_weight_byte, const MachineLimits& start);
// Geometric mean over the rows that passed of pct_of_limit / pct_ceiling (percent of each row's roofline).
double geo_mean_pct_of_roofline(const std::vector<const Row*>& rows);

// The attention and MQA-logits targets of the active ISA level (the README's tables): percent of the
// level's peak a compute-bound row must reach (amx 30 of the tile peak, avx512bf16 60 of vdpbf16ps,
// avx512 and avx2 50 of the fp32 FMA peak; 0 at scalar: no target) and the least ratio to the peer
// (amx: 1.5 for FlashMLA, 3 for MQA logits; 1 elsewhere).
struct AttentionTargets {
  double compute_pct;
  double mla_peer_ratio;
  double mqa_peer_ratio;
  const char* level;
};
AttentionTargets attention_targets();

}  // namespace tessera::bench
