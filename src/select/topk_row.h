// One row (or one part of a row) of the top-k: the streaming pass with its candidate buffer.
#pragma once

#include <cstdint>

#include "backends/cpu/select_kernels.h"

namespace tessera::select::detail {

// The kernels the registry picks for the active instruction set: the streaming filter and compaction of
// the general path, and the bf16 in-cache path's kernels (select/topk_bf16.h).
using SelectKernels = cpu::SelectKernelTable;
SelectKernels select_kernels();

struct RowRef {
  const void* data;  // element 0 of the row
  bool bf16;
};

// Per-thread working memory for one row: a candidate buffer of `capacity` entries (+ filter slack),
// radix scratch of the same size and sort buffers. Reused across calls on the same thread.
struct Workspace {
  int32_t* keys;
  int32_t* index;
  int32_t* scratch;
  int32_t* sort_keys;
  int32_t* sort_index;
  int64_t capacity;
};

// Candidate buffer size for a given k: room for k survivors plus enough new candidates that a flush
// (radix select + compaction) is rare. `extra` entries are added for merges of split rows.
int64_t candidate_capacity(int k);
// The calling thread's workspace, able to hold max(candidate_capacity(k), merge_entries) entries.
Workspace thread_workspace(int k, int64_t merge_entries);

// Ordered key of element i of a row (backends/cpu/select_kernels.h) and its inverse, as value bits.
int32_t element_key(const RowRef& row, int64_t i);
uint32_t key_to_bits(int32_t key, bool bf16);

struct PartTopk {
  int64_t count;  // entries left in ws.keys / ws.index, in index order: min(k, end - begin)
  bool nan;       // a NaN was scanned
};

// The top min(k, end - begin) entries of elements [begin, end) of a row, in index order, in ws.
// end - begin must be > 0.
PartTopk collect_topk(const SelectKernels& kernels, const RowRef& row, int64_t begin, int64_t end, int k,
                      const Workspace& ws);

// Every element of [begin, end) as a candidate (short rows: all of them are selected).
int64_t collect_all(const RowRef& row, int64_t begin, int64_t end, const Workspace& ws);

}  // namespace tessera::select::detail
