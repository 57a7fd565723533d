#include "ep/common/routing.h"

#include <vector>

#include "tessera/core/error.h"

namespace tessera::ep::detail {
namespace {

// Copies topk_idx into r.idx, checking every expert's range and that a token's experts are distinct.
// The distinctness check stamps each expert with (token, lane) instead of comparing all lane pairs
// (28 compares per top-8 token).
void copy_topk(const char* fn, const TensorView& topk_idx, Routing& r) {
  const int K = r.num_topk;
  r.idx.resize(size_t(r.num_tokens * K));
  std::vector<int64_t> stamp(size_t(r.num_experts), -1);  // token * 64 + lane of the expert's last use
  const int64_t* src = topk_idx.ptr<int64_t>();
  const int64_t s0 = topk_idx.strides[0], s1 = topk_idx.strides[1];
  for (int64_t t = 0; t < r.num_tokens; ++t) {
    int64_t* dst = r.idx.data() + t * K;
    for (int k = 0; k < K; ++k) {
      const int64_t e = src[t * s0 + k * s1];
      dst[k] = e;
      if (e < -1 || e >= r.num_experts)
        fail(ErrorCode::kInvalidArgument, fn, ": argument 'topk_idx' holds expert ", e, " at [", t, ", ", k,
             "]; experts must be in [-1, ", r.num_experts, ") (-1 = no expert)");
      if (e < 0) continue;
      int64_t& last = stamp[size_t(e)];
      if (last >= 0 && last / 64 == t)
        fail(ErrorCode::kInvalidArgument, fn, ": argument 'topk_idx' selects expert ", e, " twice in token ", t,
             " (lanes ", last % 64, " and ", k, "); the experts of a token must be distinct");
      last = t * 64 + k;
    }
  }
}

void check_common(const char* fn, const TensorView& topk_idx, int num_experts, int num_ranks) {
  check_defined(fn, "topk_idx", topk_idx);
  check_dtype(fn, "topk_idx", topk_idx, {DType::kI64});
  check_ndim(fn, "topk_idx", topk_idx, {2});
  TESSERA_CHECK(topk_idx.shape[1] >= 1 && topk_idx.shape[1] <= 32, fn, ": argument 'topk_idx' must have 1 to 32 ",
                "columns (num_topk <= 32), got shape ", topk_idx.shape_str());
  TESSERA_CHECK(num_experts > 0 && num_experts <= 2048, fn, ": argument 'num_experts' must be in [1, 2048], got ",
                num_experts);
  TESSERA_CHECK(num_experts % num_ranks == 0, fn, ": argument 'num_experts' (", num_experts,
                ") must be divisible by the number of ranks (", num_ranks, ")");
  TESSERA_CHECK(num_experts / num_ranks <= 256, fn, ": at most 256 experts per rank are supported, got ",
                num_experts / num_ranks, " (num_experts ", num_experts, " over ", num_ranks, " ranks)");
}

}  // namespace

void fill_lane_ranks(Routing& r) {
  // A table instead of a 64-bit division per lane (experts <= 2048; entry 0 is expert -1).
  std::vector<int32_t> rank_of(size_t(r.num_experts) + 1, -1);
  for (int e = 0; e < r.num_experts; ++e) rank_of[size_t(e) + 1] = e / r.experts_per_rank;
  r.lane_rank.resize(r.idx.size());
  for (size_t i = 0; i < r.idx.size(); ++i) r.lane_rank[i] = rank_of[size_t(r.idx[i] + 1)];
}

void fill_destinations(Routing& r) {
  fill_lane_ranks(r);
  r.send_list.assign(size_t(r.num_ranks), {});
  for (auto& list : r.send_list) list.reserve(size_t(r.num_tokens));
  r.slot.assign(size_t(r.num_tokens * r.num_topk), -1);
  const int K = r.num_topk;
  if (r.num_ranks <= 64) {
    // Per token a destination bit mask first (no branch per lane on the random ranks), then one
    // append per destination, then each lane's slot through a table (entry 0: lanes without expert).
    r.dest_mask.assign(size_t(r.num_tokens), 0);
    int32_t slot_of[65];
    slot_of[0] = -1;
    for (int64_t t = 0; t < r.num_tokens; ++t) {
      const int32_t* lanes = r.lane_rank.data() + t * K;
      uint64_t mask = 0;
      for (int k = 0; k < K; ++k) mask |= uint64_t(lanes[k] >= 0) << (lanes[k] & 63);
      r.dest_mask[size_t(t)] = mask;
      for (uint64_t m = mask; m; m &= m - 1) {
        const int d = __builtin_ctzll(m);
        auto& list = r.send_list[size_t(d)];
        slot_of[d + 1] = int32_t(list.size());
        list.push_back(int32_t(t));
      }
      for (int k = 0; k < K; ++k) r.slot[size_t(t * K + k)] = slot_of[lanes[k] + 1];
    }
    return;
  }
  for (int64_t t = 0; t < r.num_tokens; ++t) {
    for (int k = 0; k < r.num_topk; ++k) {
      const int dst = r.rank_of_lane(t, k);
      if (dst < 0) continue;
      auto& list = r.send_list[size_t(dst)];
      if (list.empty() || list.back() != int32_t(t)) list.push_back(int32_t(t));
      r.slot[size_t(t * r.num_topk + k)] = int32_t(list.size() - 1);
    }
  }
}

void route_topk_into(const char* fn, const TensorView& topk_idx, int num_experts, int num_ranks, Routing& r) {
  check_common(fn, topk_idx, num_experts, num_ranks);
  r.num_tokens = topk_idx.shape[0];
  r.num_topk = int(topk_idx.shape[1]);
  r.num_ranks = num_ranks;
  r.num_experts = num_experts;
  r.experts_per_rank = num_experts / num_ranks;
  copy_topk(fn, topk_idx, r);
  fill_destinations(r);
}

Routing route_topk(const char* fn, const TensorView& topk_idx, int num_experts, int num_ranks) {
  Routing r;
  route_topk_into(fn, topk_idx, num_experts, num_ranks, r);
  return r;
}

Routing route_mask(const char* fn, const TensorView& mask, const TensorView& topk_idx, int num_experts, int num_ranks) {
  check_defined(fn, "is_token_in_rank", mask);
  check_dtype(fn, "is_token_in_rank", mask, {DType::kBool});
  check_ndim(fn, "is_token_in_rank", mask, {2});
  TESSERA_CHECK(mask.shape[1] == num_ranks, fn, ": argument 'is_token_in_rank' must have one column per rank (",
                num_ranks, "), got shape ", mask.shape_str());
  Routing r;
  r.num_tokens = mask.shape[0];
  r.num_ranks = num_ranks;
  if (topk_idx.data || topk_idx.ndim) {
    check_common(fn, topk_idx, num_experts, num_ranks);
    TESSERA_CHECK(topk_idx.shape[0] == r.num_tokens, fn, ": arguments 'topk_idx' ", topk_idx.shape_str(),
                  " and 'is_token_in_rank' ", mask.shape_str(), " must have the same number of tokens");
    r.num_topk = int(topk_idx.shape[1]);
    r.num_experts = num_experts;
    r.experts_per_rank = num_experts / num_ranks;
    copy_topk(fn, topk_idx, r);
    fill_lane_ranks(r);
  }
  r.send_list.assign(size_t(num_ranks), {});
  r.slot.assign(size_t(r.num_tokens * r.num_topk), -1);
  // Destination masks as fill_destinations makes them: direct writes walk them, lanes may be absent.
  if (num_ranks <= 64) r.dest_mask.assign(size_t(r.num_tokens), 0);
  const uint8_t* m = mask.ptr<uint8_t>();
  for (int64_t t = 0; t < r.num_tokens; ++t) {
    for (int d = 0; d < num_ranks; ++d) {
      if (!m[t * mask.strides[0] + d * mask.strides[1]]) continue;
      r.send_list[size_t(d)].push_back(int32_t(t));
      if (!r.dest_mask.empty()) r.dest_mask[size_t(t)] |= uint64_t(1) << d;
    }
    for (int k = 0; k < r.num_topk; ++k) {
      const int dst = r.rank_of_lane(t, k);
      if (dst < 0) continue;
      TESSERA_CHECK(m[t * mask.strides[0] + dst * mask.strides[1]], fn, ": token ", t, " selects expert ",
                    r.idx[size_t(t * r.num_topk + k)], " on rank ", dst,
                    " but is_token_in_rank says it does not go there; the layout does not match topk_idx");
      r.slot[size_t(t * r.num_topk + k)] = int32_t(r.send_list[size_t(dst)].size() - 1);
    }
  }
  return r;
}

}  // namespace tessera::ep::detail
