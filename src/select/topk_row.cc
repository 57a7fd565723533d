#include "select/topk_row.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "backends/cpu/registry.h"
#include "select/radix_select.h"
#include "tessera/core/memory.h"

namespace tessera::select::detail {
namespace {

// Keys of the infinities: a scanned key outside [key(-inf), key(+inf)] is a NaN.
constexpr int32_t kF32NegInf = int32_t(0x807FFFFF), kF32PosInf = 0x7F800000;
constexpr int32_t kBf16NegInf = -32641, kBf16PosInf = 32640;

// Sample geometry for the first threshold: kSampleRuns contiguous runs spread over the range (a run
// is a few cache lines, friendly to the prefetchers; spreading them keeps trends along the row from
// biasing the estimate).
constexpr int kSampleRuns = 16;
constexpr int64_t kMinSample = 256, kMaxSample = 1024;

// A threshold that at least k elements of [begin, end) are expected to exceed, from a sample; INT_MIN
// (no threshold) when the row is too short for the estimate to pay off.
int32_t guess_threshold(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                        const Workspace& ws) {
  const int64_t n = end - begin;
  if (n < 4 * int64_t(k) || n < 4096) return INT_MIN;
  const int64_t m = std::clamp<int64_t>(n / 32, kMinSample, kMaxSample);
  const int64_t run = m / kSampleRuns;
  // Expected sampled elements above the k-th largest: q*m; aim 3 standard deviations (plus 2) lower
  // so that fewer than k elements pass (which costs a second pass) is very unlikely.
  const double expected = double(k) * double(m) / double(n);
  const int64_t rank = int64_t(expected + 3.0 * __builtin_sqrt(expected) + 2.0);
  if (rank >= m) return INT_MIN;
  // The filter with the lowest threshold computes the runs' keys with the vector code (every key but
  // INT_MIN, a NaN, passes); the radix select then finds the rank.
  cpu::SelectFilterArgs a{row.data, row.bf16 ? 2 : 4, 0,       0,       INT_MIN, ws.sort_keys, ws.sort_index,
                          0,        ws.capacity,      INT_MAX, INT_MIN, 1024};
  for (int r = 0; r < kSampleRuns; ++r) {
    a.pos = begin + (n - run) * r / (kSampleRuns - 1);
    a.end = a.pos + run;
    kernels.filter(&a);
  }
  if (a.count < rank) return INT_MIN;
  const KthKey kth = kth_largest(ws.sort_keys, a.count, rank, ws.scratch, a.min_key, a.max_key);
  return kth.key == INT_MIN ? INT_MIN : kth.key - 1;
}

// Every candidate key is > the pass's first threshold and <= the largest key scanned: bounds for the
// radix select.
int32_t lower_bound(int32_t threshold) {
  return threshold == INT_MIN ? INT_MIN : threshold + 1;
}

}  // namespace

SelectKernels select_kernels() {
  return cpu::kernels_for<cpu::SelectKernelTable>(cpu::Slot::kSelect, "topk");
}

int64_t candidate_capacity(int k) {
  return std::max<int64_t>(4 * int64_t(k), 4096);
}

Workspace thread_workspace(int k, int64_t merge_entries) {
  const int64_t cap = std::max(candidate_capacity(k), merge_entries);
  const int64_t stride = (cap + cpu::kSelectFilterSlack + 15) / 16 * 16;
  auto* base = static_cast<int32_t*>(thread_scratch(0, size_t(5 * stride) * sizeof(int32_t)));
  return {base, base + stride, base + 2 * stride, base + 3 * stride, base + 4 * stride, cap};
}

int32_t element_key(const RowRef& row, int64_t i) {
  if (row.bf16) {
    uint16_t h;
    std::memcpy(&h, static_cast<const char*>(row.data) + 2 * i, 2);
    return int32_t(int16_t(uint16_t(h ^ (uint16_t(int16_t(h) >> 15) & 0x7FFFu))));
  }
  uint32_t u;
  std::memcpy(&u, static_cast<const char*>(row.data) + 4 * i, 4);
  return int32_t(u ^ (uint32_t(int32_t(u) >> 31) & 0x7FFFFFFFu));
}

uint32_t key_to_bits(int32_t key, bool bf16) {
  if (bf16) return uint16_t(uint16_t(key) ^ (uint16_t(int16_t(key) >> 15) & 0x7FFFu));
  return uint32_t(key) ^ (uint32_t(key >> 31) & 0x7FFFFFFFu);
}

PartTopk collect_topk(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                      const Workspace& ws) {
  const int32_t guess = guess_threshold(kernels, row, begin, end, k, ws);
  for (int32_t first_threshold = guess;; first_threshold = INT_MIN) {
    // Expected density: the sampled guess lets about 1.5 k of the elements through; without a guess
    // everything passes until the buffer first fills.
    const int64_t expected =
        first_threshold == INT_MIN ? 1024 : std::min<int64_t>(1024, 1536 * int64_t(k) / (end - begin));
    cpu::SelectFilterArgs a{row.data, row.bf16 ? 2 : 4, begin,   end,     first_threshold, ws.keys, ws.index,
                            0,        ws.capacity,      INT_MAX, INT_MIN, int(expected)};
    bool flushed = false;
    for (;;) {
      kernels.filter(&a);
      if (a.pos == end) break;
      // Buffer full: keep exactly the top k so far; later elements must beat the k-th key (ties go
      // to the earlier, lower index, already kept).
      const KthKey kth = kth_largest(a.keys, a.count, k, ws.scratch, lower_bound(first_threshold), a.max_key);
      a.count = kernels.compact(a.keys, a.index, a.count, kth.key, kth.take_equal);
      a.threshold = std::max(a.threshold, kth.key);
      flushed = true;
    }
    // Fewer than k elements beat the sampled guess: the guess was too high; scan again without it.
    if (!flushed && a.count < k && first_threshold != INT_MIN) continue;
    const bool nan = row.bf16 ? (a.min_key < kBf16NegInf || a.max_key > kBf16PosInf)
                              : (a.min_key < kF32NegInf || a.max_key > kF32PosInf);
    return {reduce_to_top(a.keys, a.index, a.count, k, ws.scratch, kernels.compact, lower_bound(first_threshold),
                          a.max_key),
            nan};
  }
}

int64_t collect_all(const RowRef& row, int64_t begin, int64_t end, const Workspace& ws) {
  for (int64_t i = begin; i < end; ++i) {
    ws.keys[i - begin] = element_key(row, i);
    ws.index[i - begin] = int32_t(i);
  }
  return end - begin;
}

}  // namespace tessera::select::detail
