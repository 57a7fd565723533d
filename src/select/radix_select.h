// Radix selection and sorting on ordered int32 keys (see backends/cpu/select_kernels.h for the key map).
// Everything here works on candidate buffers of a few thousand entries held in cache.
#pragma once

#include <climits>
#include <cstdint>

#include "backends/cpu/select_kernels.h"

namespace tessera::select::detail {

// The k-th largest key of n keys, and how many of the entries equal to it belong to the top k:
// the top k = every key > `key`, plus `take_equal` (>= 1) of the keys == `key`.
struct KthKey {
  int32_t key;
  int64_t take_equal;
};

// 1 <= k <= n. scratch holds n entries. Histograms of up to 11 bits of the key range per level (fewer
// for small n), each level scanning only the previous level's bucket. [lo, hi] bounds every key when
// the caller knows it (e.g. the filter threshold and the largest key scanned); otherwise pass
// INT32_MIN / INT32_MAX and the bounds are computed.
KthKey kth_largest(const int32_t* keys, int64_t n, int64_t k, int32_t* scratch, int32_t lo = INT32_MIN,
                   int32_t hi = INT32_MAX);

// Reduces n entries (in index order) to their top k in place, keeping index order (the lowest positions
// win ties); returns min(n, k). `compact` is backends/cpu/select_kernels.h's compaction.
int64_t reduce_to_top(int32_t* keys, int32_t* index, int64_t n, int64_t k, int32_t* scratch,
                      cpu::SelectCompactFn compact, int32_t lo = INT32_MIN, int32_t hi = INT32_MAX);

// Sorts n entries by key, descending, stably (equal keys keep their order). tmp_keys / tmp_index hold
// n entries each. LSD radix sort with digits of up to 11 bits over the bits in which the keys differ.
void sort_desc_stable(int32_t* keys, int32_t* index, int64_t n, int32_t* tmp_keys, int32_t* tmp_index);

}  // namespace tessera::select::detail
