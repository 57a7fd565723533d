// Which tokens go to which rank. Built from topk_idx (validated here: experts in [-1, num_experts),
// no expert twice in a token) or, for the legacy Buffer, from is_token_in_rank.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::ep::detail {

struct Routing {
  int64_t num_tokens = 0;
  int num_topk = 0, num_ranks = 1, num_experts = 0;
  int experts_per_rank = 0;
  std::vector<int64_t> idx;                     // [T*K] the experts (row-major copy), -1 = none
  std::vector<int32_t> lane_rank;               // [T*K] the rank holding each lane's expert, -1 = none
  std::vector<std::vector<int32_t>> send_list;  // per destination rank: its tokens, ascending
  std::vector<int32_t> slot;                    // [T*K] index of the token in send_list[rank of lane], or -1
  std::vector<uint64_t> dest_mask;              // [T] bit d: the token goes to rank d (only when ranks <= 64)
  int rank_of_lane(int64_t t, int k) const { return lane_rank[size_t(t * num_topk + k)]; }
  int64_t sent_tokens(int dst) const { return int64_t(send_list[size_t(dst)].size()); }
};

// Validates topk_idx ([T, K] int64, any strides) and builds the routing. fn names the caller.
Routing route_topk(const char* fn, const TensorView& topk_idx, int num_experts, int num_ranks);
// The same into an existing routing, whose vectors keep their capacity (a recycled one: ElasticState).
void route_topk_into(const char* fn, const TensorView& topk_idx, int num_experts, int num_ranks, Routing& r);
// Legacy Buffer: destinations from is_token_in_rank [T, R] bool; topk_idx (optional, may be undefined)
// is still copied for the receivers' metadata.
Routing route_mask(const char* fn, const TensorView& is_token_in_rank, const TensorView& topk_idx, int num_experts,
                   int num_ranks);

// Fills lane_rank, send lists and slots from idx.
void fill_destinations(Routing& r);

}  // namespace tessera::ep::detail
