// The bf16 path of the top-k. A bf16 key has 16 bits, so the k-th largest key is found by counting
// rather than by radix histograms, and one 32-bit word holds a candidate's key and position:
//  1. a spread sample gives a window (lo, hi] of keys that holds the k-th key with high probability;
//  2. one pass over the range (the only one) collects every element with key > lo as a packed
//     candidate (key << 16 | index - segment start; segments of 65536 elements);
//  3. the candidates' keys inside the window, counted at interpolated thresholds, give the exact k-th
//     key and how many of its ties are selected (the window becomes (hi, max] when k or more keys
//     exceed hi);
//  4. the candidates are emitted in index order, straight into the caller's outputs when no sort is
//     asked for.
// Fewer than k candidates (the sample misjudged the range) or more than the workspace holds sends the
// range to the general path (collect_topk). Every route selects the same set: the one defined by the
// key order and the lowest-index tie rule.
#pragma once

#include <cstdint>

#include "select/topk_row.h"

namespace tessera::select::detail {

// A window of keys (lo, hi], lo in [-32769, 32767), hi in (lo, 32767], and the fraction of the range
// expected above lo (1/1024 units, a hint for the collect pass).
struct KeyWindow {
  int32_t lo, hi;
  int expected_hits_per_1024;
};

// A range's candidates after steps 1-3: `count` packed candidates (in ws.scratch) in index order, and
// how to select from them: every key > kth plus the first take_equal keys == kth. nan: the range holds
// a NaN (nothing else is meaningful then).
struct Bf16Selection {
  const int32_t* packed;
  int64_t count;
  int64_t begin, end;       // the range; segment s starts at element begin + 65536 * s
  int64_t segment_end[32];  // the candidates of segment s end at segment_end[s] (ranges up to 2^21)
  int32_t kth;
  int64_t take_equal;
  bool nan;
};

// Whether a bf16 range of len elements takes this path rather than the general one.
bool bf16_path_fits(int64_t len, int k);

// Workspace entries (thread_workspace's merge_entries) the path wants for a range of len elements.
int64_t bf16_candidate_capacity(int64_t len, int k);

// Prefetches the sample of a range and its first head_elements elements (so a thread can fetch the
// next row's while it works on this one).
void prefetch_bf16_sample(const RowRef& row, int64_t begin, int64_t end, int64_t head_elements);

// Step 1 for [begin, end) (bf16_path_fits(end - begin, k)); uses ws.sort_keys.
KeyWindow sample_window(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                        const Workspace& ws);

// The range a thread takes up after this one (data == nullptr: none), to be fetched while this one runs.
struct NextRange {
  const void* data = nullptr;
  int64_t begin = 0, end = 0;
};

// Steps 2-3 for [begin, end) with a given window (any window gives the exact selection or false).
// Uses ws.scratch and ws.sort_index. False when the range needs the general path.
bool select_bf16_in_window(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                           const KeyWindow& window, const Workspace& ws, Bf16Selection* sel,
                           const NextRange& next = {});

// Steps 1-3.
bool select_bf16(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                 const Workspace& ws, Bf16Selection* sel, const NextRange& next = {});

// Whether select_bf16 over a range of len elements prefetches the whole NextRange during its collect
// pass (else the caller prefetches the next range's sample itself: prefetch_bf16_sample).
bool prefetched_whole_by_collect(int64_t len);

// Step 4: writes the k selected entries of a (non-NaN) selection. index32 / index64: exactly one, plus
// offset; values and keys optional (see cpu::SelectEmitArgs).
void emit_bf16(const SelectKernels& kernels, const Bf16Selection& sel, int k, int64_t offset, int32_t* index32,
               int64_t* index64, uint16_t* values, int32_t* keys);

// collect_topk for bf16 ranges: the top min(k, end - begin) entries of [begin, end) in ws.keys /
// ws.index in index order, by this path when it fits and succeeds, else by the general one.
PartTopk collect_topk_bf16(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                           const Workspace& ws);

}  // namespace tessera::select::detail
