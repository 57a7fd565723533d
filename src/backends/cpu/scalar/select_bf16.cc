// The portable bf16 select kernels (sample, collect, window keys, count, emit): the references the
// AVX-512 versions must match entry for entry (same candidates in the same order, same stop positions).
#include <cstring>

#include "backends/cpu/select_kernels.h"

namespace tessera::cpu {
namespace {

// The collect pass stops in units of the AVX-512 vector (32 bf16 elements) so every ISA stops at the
// same positions.
constexpr int64_t kWidth = 32;

int16_t key_at(const void* row, int64_t i) {
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(row) + 2 * i, 2);
  return int16_t(uint16_t(h ^ (uint16_t(int16_t(h) >> 15) & 0x7FFFu)));
}

int32_t packed_key(int32_t p) {
  return p >> 16;
}

void sample(const void* row, const int64_t* starts, int runs, int16_t* out) {
  for (int j = 0; j < runs; ++j)
    for (int64_t i = 0; i < kWidth; ++i) out[j * kWidth + i] = key_at(row, starts[j] + i);
}

void collect(SelectCollectArgs* a) {
  int32_t mn = a->min_key, mx = a->max_key;
  int64_t pos = a->pos, count = a->count;
  while (pos < a->end && count + kWidth <= a->capacity) {
    const int64_t stop = pos + kWidth < a->end ? pos + kWidth : a->end;
    for (int64_t i = pos; i < stop; ++i) {
      const int32_t key = key_at(a->row, i);
      mn = key < mn ? key : mn;
      mx = key > mx ? key : mx;
      if (key > a->lo) a->packed[count++] = int32_t(uint32_t(uint16_t(key)) << 16 | uint32_t(i - a->base));
    }
    pos = stop;
  }
  a->pos = pos;
  a->count = count;
  a->min_key = mn;
  a->max_key = mx;
}

int64_t window_keys(const int32_t* packed, int64_t n, int32_t lo, int32_t hi, int16_t* keys, int64_t* above) {
  int64_t count = 0, up = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t key = packed_key(packed[i]);
    up += key > hi;
    if (key > lo && key <= hi) keys[count++] = int16_t(key);
  }
  *above = up;
  return count;
}

void count2(const int16_t* keys, int64_t n, const int32_t t[2], int64_t counts[2]) {
  int64_t c0 = 0, c1 = 0;
  for (int64_t i = 0; i < n; ++i) {
    c0 += keys[i] > t[0];
    c1 += keys[i] > t[1];
  }
  counts[0] = c0;
  counts[1] = c1;
}

void emit(SelectEmitArgs* a) {
  for (int64_t i = 0; i < a->n; ++i) {
    const int32_t key = packed_key(a->packed[i]);
    if (key < a->kth || (key == a->kth && a->equal_left-- <= 0)) continue;
    const int64_t index = a->base + (a->packed[i] & 0xFFFF);
    if (a->index32) a->index32[a->count] = int32_t(uint32_t(index) + uint32_t(a->offset));
    if (a->index64) a->index64[a->count] = index + a->offset;
    if (a->values) a->values[a->count] = uint16_t(uint16_t(key) ^ (uint16_t(int16_t(key) >> 15) & 0x7FFFu));
    if (a->keys) a->keys[a->count] = key;
    ++a->count;
  }
  if (a->equal_left < 0) a->equal_left = 0;
}

}  // namespace

SelectBf16Kernels select_bf16_kernels_scalar() {
  return {sample, collect, window_keys, count2, emit};
}

}  // namespace tessera::cpu
