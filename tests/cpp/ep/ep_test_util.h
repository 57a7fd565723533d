// Shared pieces of the multi-rank ep tests.
//
// Inputs are generated from (seed, rank) alone, so every rank can rebuild every other rank's inputs
// and compute what it must receive and what combine must return without any communication: the
// reference all-to-all below is independent of the transport under test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/ep.h"

namespace tessera::ep::test {

Group& world_group();
std::shared_ptr<Group> world_ptr();

struct Config {
  uint64_t seed = 1;
  int64_t tokens = 97;  // rank r has max(1, tokens - 3r) tokens
  int hidden = 256;
  int num_topk = 6;
  int num_experts = 0;  // 0: 8 per rank
  int num_max = 128;
  int packs = 2;  // FP8 scale packs per token
  double mask_prob = 0.1;
  int experts(int ranks) const { return num_experts ? num_experts : 8 * ranks; }
};

struct RankInputs {
  int rank = 0;
  int64_t T = 0;
  int hidden = 0, K = 0, E = 0, packs = 0;
  std::vector<uint16_t> x;   // bf16 [T, hidden]
  std::vector<uint8_t> x8;   // e4m3 bytes [T, hidden]
  std::vector<uint32_t> sf;  // opaque 4-byte packs [T, packs]
  std::vector<int64_t> idx;  // [T, K], -1 = none
  std::vector<float> w;      // [T, K]
  int rank_of(int64_t t, int k, int ranks) const {
    const int64_t e = idx[size_t(t * K + k)];
    return e < 0 ? -1 : int(e / (E / ranks));
  }
};

RankInputs make_inputs(const Config& c, int rank, int ranks);
std::vector<RankInputs> all_inputs(const Config& c, int ranks);

// Views of the inputs (the caller keeps RankInputs alive).
TensorView view_x(const RankInputs& in);
TensorView view_x8(const RankInputs& in);
TensorView view_sf(const RankInputs& in);
TensorView view_idx(const RankInputs& in);
TensorView view_w(const RankInputs& in);

// ---- reference dispatch (receiver `me`) ----
struct RefRow {
  int src = 0;
  int64_t token = 0;
  int lane = -1;  // expand: the lane this row is for
};
// Non-expanded rows: sources ascending, tokens ascending, tokens with an expert on `me`.
std::vector<RefRow> ref_rows(const std::vector<RankInputs>& in, int me, int ranks);
// Expanded layout: rows per local expert (unaligned), in (source, token) order.
std::vector<std::vector<RefRow>> ref_expert_rows(const std::vector<RankInputs>& in, int me, int ranks);

// ---- reference combine (source `me`) ----
// What rank d returns for a token it received (non-expand) or one expanded lane (expand): a
// deterministic bf16 function of the row, so the reference can recompute it from the inputs.
uint16_t contribution(uint16_t x, int d);
uint16_t lane_contribution(uint16_t x, int d, int lane);

struct CombineTopo {
  bool hybrid = false;
  bool multiple_reduction = true;  // expand only
  bool expand = false;
  std::vector<int> node_of;  // per rank
  int my_node = 0;
};
CombineTopo combine_topo(const ElasticBuffer& buf, bool expand, bool multiple_reduction);
// Expected combined row of token t of rank me (bias rows may be null), bf16 bits.
std::vector<uint16_t> ref_combine_row(const RankInputs& mine, int64_t t, int ranks, const CombineTopo& topo,
                                      const uint16_t* bias0, const uint16_t* bias1);

// ---- helpers ----
float bf16f(uint16_t h);
uint16_t f2bf16(float x);
std::string where(int rank, const char* what, int64_t row, int64_t col);

}  // namespace tessera::ep::test
