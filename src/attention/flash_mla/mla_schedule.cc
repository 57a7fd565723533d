// Split plans and their checks (see mla_schedule.h).
#include "attention/flash_mla/mla_schedule.h"

#include <algorithm>
#include <string>

#include "tessera/core/error.h"

namespace tessera::flash_mla {
namespace {

constexpr int64_t kMaxSplits = 1 << 16;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// (request, split) of item `item` (item == total gives (requests, 0)).
void item_position(const std::vector<int32_t>& num_splits, int64_t item, int64_t* req, int64_t* split) {
  const auto it = std::upper_bound(num_splits.begin(), num_splits.end(), int32_t(item));
  *req = int64_t(it - num_splits.begin()) - 1;
  if (*req >= int64_t(num_splits.size()) - 1) {
    *req = int64_t(num_splits.size()) - 1;
    *split = 0;
    return;
  }
  *split = item - num_splits[size_t(*req)];
}

std::string opt_str(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("None");
}

}  // namespace

Schedule make_schedule(const std::vector<int64_t>& lens, int64_t units_per_item, int64_t parts) {
  const int64_t b = int64_t(lens.size());
  int64_t total_len = 0;
  for (int64_t l : lens) total_len += std::max<int64_t>(l, 0);
  Schedule s;
  s.num_splits.assign(size_t(b + 1), 0);
  std::vector<int64_t> weight;  // per item: tokens of its split (+1 so empty requests still count)
  for (int64_t i = 0; i < b; ++i) {
    const int64_t len = std::max<int64_t>(lens[size_t(i)], 0);
    int64_t ns = 1;
    if (total_len > 0 && len > 0) {
      ns = ceil_div(kTargetUnits * len, std::max<int64_t>(units_per_item, 1) * total_len);
      ns = std::clamp<int64_t>(ns, 1, std::max<int64_t>(1, std::min(len / kMinSplitTokens, kMaxSplits)));
    }
    s.num_splits[size_t(i + 1)] = int32_t(s.num_splits[size_t(i)] + ns);
    for (int64_t k = 0; k < ns; ++k) weight.push_back(ceil_div(len, ns) + 1);
  }
  const int64_t items = int64_t(weight.size());
  s.parts = std::max<int64_t>(1, std::min(parts, items));
  int64_t sum_w = 0;
  for (int64_t w : weight) sum_w += w;
  // Part p takes the items whose weight midpoint falls into [p, p+1) * sum_w / parts.
  std::vector<int64_t> begin(size_t(s.parts + 1), items);
  begin[0] = 0;
  int64_t acc = 0, p = 1;
  for (int64_t i = 0; i < items; ++i) {
    const int64_t mid2 = 2 * acc + weight[size_t(i)];  // twice the midpoint
    while (p < s.parts && mid2 >= 2 * sum_w * p / s.parts) begin[size_t(p++)] = i;
    acc += weight[size_t(i)];
  }
  s.tile_scheduler_metadata.assign(size_t(s.parts * 8), 0);
  for (int64_t q = 0; q < s.parts; ++q) {
    int32_t* row = s.tile_scheduler_metadata.data() + q * 8;
    int64_t req, split;
    item_position(s.num_splits, begin[size_t(q)], &req, &split);
    row[0] = int32_t(req);
    row[1] = int32_t(split);
    item_position(s.num_splits, begin[size_t(q + 1)], &req, &split);
    row[2] = int32_t(req);
    row[3] = int32_t(split);
    row[4] = int32_t(begin[size_t(q)]);
    row[5] = int32_t(begin[size_t(q + 1)]);
    row[6] = int32_t(items);
  }
  return s;
}

void check_schedule(const char* fn, const Schedule& s, int64_t requests) {
  TESSERA_CHECK(int64_t(s.num_splits.size()) == requests + 1, fn,
                ": argument 'num_splits' must have batch_size + 1 = ", requests + 1, " entries, got ",
                s.num_splits.size(), " (recompute it with get_mla_metadata for this batch)");
  TESSERA_CHECK(s.num_splits[0] == 0, fn, ": argument 'num_splits' must start with 0, got ", s.num_splits[0]);
  for (int64_t i = 0; i < requests; ++i) {
    const int64_t ns = int64_t(s.num_splits[size_t(i + 1)]) - s.num_splits[size_t(i)];
    TESSERA_CHECK(ns >= 1 && ns <= kMaxSplits, fn,
                  ": argument 'num_splits' must be prefix sums of split counts in [1, ", kMaxSplits, "], got ", ns,
                  " splits for request ", i);
  }
  const int64_t items = s.num_splits[size_t(requests)];
  TESSERA_CHECK(s.parts >= 1 && int64_t(s.tile_scheduler_metadata.size()) == s.parts * 8, fn,
                ": argument 'tile_scheduler_metadata' must have shape [parts >= 1, 8], got ",
                s.tile_scheduler_metadata.size(), " values for ", s.parts, " parts");
  int64_t expect_begin = 0;
  for (int64_t p = 0; p < s.parts; ++p) {
    const int32_t* row = s.tile_scheduler_metadata.data() + p * 8;
    int64_t req, split;
    bool ok = row[4] == expect_begin && row[5] >= row[4] && row[5] <= items && row[6] == items;
    if (ok) {
      item_position(s.num_splits, row[4], &req, &split);
      ok = row[0] == req && row[1] == split;
      item_position(s.num_splits, row[5], &req, &split);
      ok = ok && row[2] == req && row[3] == split;
    }
    TESSERA_CHECK(ok, fn, ": argument 'tile_scheduler_metadata' row ", p,
                  " does not describe the next range of (request, split) items of 'num_splits' "
                  "(recompute both with get_mla_metadata for this batch)");
    expect_begin = row[5];
  }
  TESSERA_CHECK(expect_begin == items, fn, ": argument 'tile_scheduler_metadata' covers ", expect_begin, " of ", items,
                " (request, split) items (recompute it with get_mla_metadata for this batch)");
}

void check_same_config(const char* fn, const SchedConfig& rec, const SchedConfig& now) {
  const char* help =
      ". Your input arguments are inconsistent with sched_meta; pass the same shapes and flags to every "
      "flash_mla_with_kvcache call that shares one FlashMLASchedMeta (or get a new one from get_mla_metadata)";
  auto same = [&](const char* field, const char* what, int64_t r, int64_t n) {
    TESSERA_CHECK(r == n, fn, ": sched_meta.config.", field, " must be equal to ", what, " (recorded ", r, ", got ", n,
                  ")", help);
  };
  auto same_opt = [&](const char* field, const char* what, const std::optional<int64_t>& r,
                      const std::optional<int64_t>& n) {
    TESSERA_CHECK(r == n, fn, ": sched_meta.config.", field, " must be equal to ", what, " (recorded ", opt_str(r),
                  ", got ", opt_str(n), ")", help);
  };
  same("b", "batch_size", rec.b, now.b);
  same("s_q", "seq_len_q", rec.s_q, now.s_q);
  same("h_q", "num_heads_q", rec.h_q, now.h_q);
  same("page_block_size", "page_block_size", rec.page_block_size, now.page_block_size);
  same("h_k", "num_heads_k", rec.h_k, now.h_k);
  same("causal", "causal", rec.causal, now.causal);
  same("is_fp8_kvcache", "is_fp8_kvcache", rec.is_fp8_kvcache, now.is_fp8_kvcache);
  same_opt("topk", "the last dim of indices", rec.topk, now.topk);
  same_opt("extra_page_block_size", "the page_block_size of extra_k_cache", rec.extra_page_block_size,
           now.extra_page_block_size);
  same_opt("extra_topk", "the last dim of extra_indices_in_kvcache", rec.extra_topk, now.extra_topk);
}

}  // namespace tessera::flash_mla
