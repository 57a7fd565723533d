// Plain interface between the top-k driver (src/select) and its per-ISA streaming filters. No inline
// functions or templates here: ISA translation units include this file (see README.md).
//
// Ordered keys: a value's bits mapped to an int32 whose signed order is the value order, with -0 just
// below +0. fp32 bits u: key = u ^ ((int32(u) >> 31) & 0x7FFFFFFF). bf16 bits h: the same on 16 bits
// (key16 = h ^ ((int16(h) >> 15) & 0x7FFF)), sign-extended to int32. The map is its own inverse.
// Positive NaNs get keys above +inf, negative NaNs keys below -inf.
#pragma once

#include <cstdint>

#include "tessera/core/cpu.h"

namespace tessera::cpu {

// Entries the candidate arrays must hold beyond `capacity`: a filter stores whole vectors.
constexpr int64_t kSelectFilterSlack = 64;

// One call of a streaming filter: scans row elements [pos, end) in order and appends (key, position)
// of every element whose key is > threshold to keys[count...] / index[count...], keeping their order.
// It stops early, before a vector could push count past capacity; on return pos is where it stopped
// (== end when the range is done). min_key / max_key are updated with every scanned element's key (so
// the caller sees NaNs, which sit outside [key(-inf), key(+inf)]).
struct SelectFilterArgs {
  const void* row;  // element 0 of the row
  int elem_bytes;   // 2 = bf16, 4 = fp32
  int64_t pos, end;
  int32_t threshold;
  int32_t* keys;
  int32_t* index;
  int64_t count;
  int64_t capacity;
  int32_t min_key, max_key;
  // Expected fraction of elements that pass, in 1/1024 units (a hint: vector filters choose between
  // appending hits one by one and compressing whole vectors; results never depend on it).
  int expected_hits_per_1024;
};

using SelectFilterFn = void (*)(SelectFilterArgs* args);

// Stable compaction after a radix select: keeps, in order, the entries with key > kth and the first
// take_equal entries with key == kth; returns the new count. The arrays hold kSelectFilterSlack
// entries beyond n.
using SelectCompactFn = int64_t (*)(int32_t* keys, int32_t* index, int64_t n, int32_t kth, int64_t take_equal);

// ---- bf16 rows: one pass collects packed candidates, the k-th key is found by counting ----
// (src/select/topk_bf16.cc). Keys are the 16-bit ordered keys above, as int16. A packed candidate is
// (uint16(key) << 16) | (index - base) for an element index in [base, base + 65536): as an int32 it
// orders like its key.

// Ordered keys of `runs` runs of 32 elements of a bf16 row, run j starting at element starts[j]; key
// 32*j + i is element starts[j] + i. out holds 32 * runs entries.
using SelectSampleFn = void (*)(const void* row, const int64_t* starts, int runs, int16_t* out);

// One pass over bf16 elements [pos, end) (end - base <= 65536) appending, in index order, the packed
// candidate of every element with key > lo to packed[count...]. Stops, like SelectFilterArgs, before a
// 32-element vector could push count past capacity (pos < end on return then). min_key / max_key as in
// the filter.
struct SelectCollectArgs {
  const void* row;  // element 0 of a bf16 row
  int64_t pos, end, base;
  int32_t lo;       // in [-32769, 32767]
  int32_t* packed;  // holds capacity + kSelectFilterSlack entries
  int64_t count;
  int64_t capacity;
  int32_t min_key, max_key;
  // Expected fraction of elements that pass, in 1/1024 units (a hint, as in SelectFilterArgs).
  int expected_hits_per_1024;
  // Optional: bytes [0, next_bytes) at `next` (the caller's next row) are prefetched in step with the
  // pass, so their fetch from memory overlaps this row's work instead of stalling ahead of it.
  const char* next = nullptr;
  int64_t next_bytes = 0;
};
using SelectCollectFn = void (*)(SelectCollectArgs* args);

// The keys lo < key <= hi of n packed candidates, in order, to keys[0...] (n + kSelectFilterSlack
// entries); returns their number and sets *above to the number of keys > hi. lo in [-32769, 32767],
// hi in [lo + 1, 32767].
using SelectWindowKeysFn = int64_t (*)(const int32_t* packed, int64_t n, int32_t lo, int32_t hi, int16_t* keys,
                                       int64_t* above);

// counts[j] = the number of keys[0..n) greater than t[j], for two thresholds at once (a bisection or
// interpolation step in src/select/topk_bf16.cc). t[j] in [-32768, 32767].
using SelectCount2Fn = void (*)(const int16_t* keys, int64_t n, const int32_t t[2], int64_t counts[2]);

// Writes, in order, the packed candidates [0, n) (indices base + low 16 bits) with key > kth, and those
// with key == kth while equal_left > 0 (decremented for each), at entries count... of the outputs;
// count advances. Outputs: exactly one of index32 (index + offset, wrapping like an int32 store) and
// index64 (index + offset); optional (null = not written) values (the element's bf16 bits) and keys
// (the ordered key, int32). Stores never reach entry `selected` or beyond.
struct SelectEmitArgs {
  const int32_t* packed;
  int64_t n, base;
  int32_t kth;
  int64_t equal_left;
  int64_t count, selected;
  int64_t offset;
  int32_t* index32;
  int64_t* index64;
  uint16_t* values;
  int32_t* keys;
};
using SelectEmitFn = void (*)(SelectEmitArgs* args);

struct SelectBf16Kernels {
  SelectSampleFn sample;
  SelectCollectFn collect;
  SelectWindowKeysFn window_keys;
  SelectCount2Fn count2;
  SelectEmitFn emit;
};

// One ISA's whole set: the registry's table for Slot::kSelect (registry.h).
struct SelectKernelTable {
  SelectFilterFn filter;
  SelectCompactFn compact;
  SelectBf16Kernels bf16;
};

const SelectKernelTable* select_kernels_scalar();
// Only after cpu_features() reported AVX-512 (F, BW, DQ, VL).
const SelectKernelTable* select_kernels_avx512();
// The Highway set of `level` (avx2, or avx512 and above); nullptr when no target of that level was built.
const SelectKernelTable* select_kernels_hwy(Isa level);

// The bf16 parts of the scalar and avx512 sets (each folder's select_bf16.cc).
SelectBf16Kernels select_bf16_kernels_scalar();
SelectBf16Kernels select_bf16_kernels_avx512();

}  // namespace tessera::cpu
