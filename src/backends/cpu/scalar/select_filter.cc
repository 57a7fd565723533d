// The portable streaming filter and compaction of the top-k driver: the references every ISA version
// must match entry for entry (same appended entries in the same order, same stop position rules).
#include <cstring>

#include "backends/cpu/select_kernels.h"

namespace tessera::cpu {
namespace {

int32_t ordered_key_f32(uint32_t u) {
  return int32_t(u ^ (uint32_t(int32_t(u) >> 31) & 0x7FFFFFFFu));
}

int32_t ordered_key_bf16(uint16_t h) {
  return int32_t(int16_t(uint16_t(h ^ (uint16_t(int16_t(h) >> 15) & 0x7FFFu))));
}

// Vector width the ISA filters use for this element size: stopping rules are stated in these units so
// every filter stops at the same positions.
int64_t width(int elem_bytes) {
  return elem_bytes == 2 ? 32 : 16;
}

void filter(SelectFilterArgs* a) {
  const int64_t w = width(a->elem_bytes);
  int32_t mn = a->min_key, mx = a->max_key;
  int64_t pos = a->pos, count = a->count;
  while (pos < a->end && count + w <= a->capacity) {
    const int64_t stop = pos + w < a->end ? pos + w : a->end;
    for (int64_t i = pos; i < stop; ++i) {
      int32_t key;
      if (a->elem_bytes == 2) {
        uint16_t h;
        std::memcpy(&h, static_cast<const char*>(a->row) + 2 * i, 2);
        key = ordered_key_bf16(h);
      } else {
        uint32_t u;
        std::memcpy(&u, static_cast<const char*>(a->row) + 4 * i, 4);
        key = ordered_key_f32(u);
      }
      mn = key < mn ? key : mn;
      mx = key > mx ? key : mx;
      if (key > a->threshold) {
        a->keys[count] = key;
        a->index[count] = int32_t(i);
        ++count;
      }
    }
    pos = stop;
  }
  a->pos = pos;
  a->count = count;
  a->min_key = mn;
  a->max_key = mx;
}

int64_t compact(int32_t* keys, int32_t* index, int64_t n, int32_t kth, int64_t take_equal) {
  int64_t out = 0, equal_left = take_equal;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t key = keys[i];
    const bool keep = key > kth || (key == kth && equal_left > 0);
    equal_left -= key == kth;
    keys[out] = key;
    index[out] = index[i];
    out += keep;
  }
  return out;
}

}  // namespace

const SelectKernelTable* select_kernels_scalar() {
  static const SelectKernelTable table = {filter, compact, select_bf16_kernels_scalar()};
  return &table;
}

}  // namespace tessera::cpu
