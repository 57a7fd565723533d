// Copying received groups into the dispatch outputs: the non-expanded layout (rows grouped by source
// rank, then source token) and the expanded layout (one row per (token, local expert), grouped by
// expert, each expert starting at an expert_alignment-aligned row, padding rows zero).
#pragma once

#include <cstdint>
#include <vector>

#include "ep/common/record_layout.h"

namespace tessera::ep::detail {

struct RecvLayout {
  std::vector<int64_t> base, count;  // per source rank
  int64_t total = 0;
};
RecvLayout layout_of(const std::vector<GroupData>& groups);

struct ExpertCounts {
  std::vector<int32_t> unaligned, aligned, start;  // per local expert; start = aligned prefix (exclusive)
  int64_t expanded = 0;                            // sum of aligned counts
};
// Counts the lanes of received tokens whose expert lives on rank `me`.
ExpertCounts count_local_experts(const std::vector<GroupData>& groups, int num_topk, int me, int experts_per_rank,
                                 int alignment);

struct UnpackOut {
  char* x = nullptr;
  int64_t x_pitch = 0, hidden_bytes = 0;  // output row pitch and bytes copied per row
  char* sf = nullptr;                     // 4-byte packs: element (row, p) at sf + row*sf_row + p*sf_col
  int64_t sf_row = 0, sf_col = 0, packs = 0;
  int64_t* topk = nullptr;             // non-expand [N, K]: local expert or -1
  float* w = nullptr;                  // non-expand [N, K]; expand [M]
  int32_t* meta = nullptr;             // [N, K + 2]
  bool zero_nonlocal_weights = false;  // legacy Buffer: weights of other ranks' experts are 0
};

struct UnpackContext {
  int me = 0, num_topk = 0, experts_per_rank = 0;
  int64_t num_max = 0;
  int threads = 1;
};

void unpack_non_expand(const UnpackContext& ctx, const std::vector<GroupData>& groups, const RecvLayout& layout,
                       const UnpackOut& out);
// Fills metadata columns 2.. with each lane's expanded row; copies rows; zeroes padding rows.
void unpack_expand(const UnpackContext& ctx, const std::vector<GroupData>& groups, const RecvLayout& layout,
                   const ExpertCounts& counts, const UnpackOut& out);

}  // namespace tessera::ep::detail
