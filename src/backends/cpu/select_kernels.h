// Plain interface between the top-k driver (src/select) and its per-ISA streaming filters. No inline
// functions or templates here: ISA translation units include this file (see README.md).
//
// Ordered keys: a value's bits mapped to an int32 whose signed order is the value order, with -0 just
// below +0. fp32 bits u: key = u ^ ((int32(u) >> 31) & 0x7FFFFFFF). bf16 bits h: the same on 16 bits
// (key16 = h ^ ((int16(h) >> 15) & 0x7FFF)), sign-extended to int32. The map is its own inverse.
// Positive NaNs get keys above +inf, negative NaNs keys below -inf.
#pragma once

#include <cstdint>

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

SelectFilterFn select_filter_scalar();
SelectCompactFn select_compact_scalar();
// nullptr when the library was built without AVX-512 kernels.
SelectFilterFn select_filter_avx512();
SelectCompactFn select_compact_avx512();

}  // namespace tessera::cpu
