// The Highway streaming filters (fp32 and bf16 rows) and compaction of the top-k driver. A filter scans
// blocks of 256 bytes: loads, ordered keys, the block's min and max; only a block whose max passes the
// threshold looks at single lanes (the common case after a sampled threshold is a handful of ops per
// vector). A block with few hits appends them one by one (positions from the mask bits, keys recomputed
// from the row in L1); a denser one gathers every vector's passing lanes (select_lanes-inl.h). Must
// match the scalar filter (scalar/select_filter.cc) entry for entry, stop positions included: it steps
// in the reference's units (16 fp32 or 32 bf16 elements), a block being four such steps.
#if defined(TESSERA_HWY_SELECT_FILTER_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_SELECT_FILTER_INL_H_
#undef TESSERA_HWY_SELECT_FILTER_INL_H_
#else
#define TESSERA_HWY_SELECT_FILTER_INL_H_
#endif

#include <hwy/highway.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/hwy/select_lanes-inl.h"
#include "backends/cpu/hwy/select_streams-inl.h"
#include "backends/cpu/select_kernels.h"

// Built for the AVX2 and AVX3 targets only (levels.h); the baseline target of foreach_target gets none.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

// Bytes ahead of the scan that it prefetches: the row comes from memory once, and the hardware
// prefetchers stop at page boundaries.
constexpr int64_t kPrefetchBytes = 8192;

// The hit count from which a block gathers whole vectors instead of appending hits one by one, from the
// caller's expected density (the branch on the count mispredicts when the density sits near the choice).
HWY_INLINE int64_t dense_hits(int expected_hits_per_1024, int64_t block_elems) {
  const int64_t expected = expected_hits_per_1024 * block_elems / 1024;
  return expected >= 6 ? 1 : expected <= 2 ? 1000 : 12;
}

// ---- fp32 rows ----

constexpr int64_t kStepF32 = 16;  // the reference's stop unit

// Scans the kElems elements at row + pos: folds their keys into the running min / max and appends
// those > thr. The keys stay in registers for the hits: at a sampled threshold about a third of the
// blocks have one, too many to reload and recompute them in a separate call.
template <int64_t kElems>
HWY_INLINE int64_t f32_block(const int32_t* row, int64_t pos, V32 thr, int64_t dense, V32* mn, V32* mx,
                             SelectFilterArgs* a, int64_t count) {
  constexpr int64_t kVecs = kElems / kLanes32;
  static_assert(kElems <= 64, "the hits are one 64-bit mask");
  const D32 d;
  V32 k[kVecs];
#pragma GCC unroll 8
  for (int64_t j = 0; j < kVecs; ++j) k[j] = ordered_key_f32(hn::LoadU(d, row + pos + j * kLanes32));
  V32 lo = k[0], hi = k[0];
#pragma GCC unroll 8
  for (int64_t j = 1; j < kVecs; ++j) {
    lo = hn::Min(lo, k[j]);
    hi = hn::Max(hi, k[j]);
  }
  *mn = hn::Min(*mn, lo);
  *mx = hn::Max(*mx, hi);
  if (hn::AllFalse(d, hn::Gt(hi, thr))) return count;
  uint64_t bits = 0;
#pragma GCC unroll 8
  for (int64_t j = 0; j < kVecs; ++j) bits |= mask_bits(d, hn::Gt(k[j], thr)) << (j * kLanes32);
  if (int64_t(hwy::PopCount(bits)) >= dense) {
    const V32 iota = hn::Iota(d, 0);
#pragma GCC unroll 8
    for (int64_t j = 0; j < kVecs; ++j)
      count = append_lanes(bits >> (j * kLanes32) & live_bits(kLanes32, kLanes32), k[j],
                           hn::Add(iota, hn::Set(d, int32_t(pos + j * kLanes32))), a->keys, a->index, count);
    return count;
  }
  int32_t* keys = a->keys;
  int32_t* index = a->index;
  do {
    const int64_t i = pos + int64_t(hwy::Num0BitsBelowLS1Bit_Nonzero64(bits));
    keys[count] = scalar_key_f32(row[i]);
    index[count] = int32_t(i);
    ++count;
    bits &= bits - 1;
  } while (bits);
  return count;
}

void filter_f32(SelectFilterArgs* a) {
  const D32 d;
  const int32_t* row = static_cast<const int32_t*>(a->row);
  const V32 thr = hn::Set(d, a->threshold);
  V32 mn = hn::Set(d, INT32_MAX), mx = hn::Set(d, INT32_MIN);
  constexpr int64_t kBlock = 4 * kStepF32;
  const int64_t dense = dense_hits(a->expected_hits_per_1024, kBlock);
  V32 smn = mn, smx = mx;  // kept only when the streamed scan completes
  if (filter_blocks_in_streams<kBlock, 4>(a, [&](int64_t pos, SelectFilterArgs* region, int64_t c) {
        return f32_block<kBlock>(row, pos, thr, dense, &smn, &smx, region, c);
      })) {
    mn = smn;
    mx = smx;
  }
  int64_t pos = a->pos, count = a->count;
  const int64_t end = a->end, cap = a->capacity;
  while (pos + kBlock <= end && count + kBlock <= cap) {
    if (pos + kPrefetchBytes / 4 < end)
      for (int64_t b = 0; b < kBlock * 4; b += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(row + pos) + kPrefetchBytes + b);
    count = f32_block<kBlock>(row, pos, thr, dense, &mn, &mx, a, count);
    pos += kBlock;
  }
  while (pos + kStepF32 <= end && count + kStepF32 <= cap) {
    count = f32_block<kStepF32>(row, pos, thr, 1, &mn, &mx, a, count);
    pos += kStepF32;
  }
  int32_t tail_min = INT32_MAX, tail_max = INT32_MIN;
  if (pos < end && count + kStepF32 <= cap) {  // the last, partial step
    for (; pos < end; ++pos) {
      const int32_t key = scalar_key_f32(row[pos]);
      tail_min = key < tail_min ? key : tail_min;
      tail_max = key > tail_max ? key : tail_max;
      if (key > a->threshold) {
        a->keys[count] = key;
        a->index[count] = int32_t(pos);
        ++count;
      }
    }
  }
  const int32_t vmin = hn::GetLane(hn::MinOfLanes(d, mn)), vmax = hn::GetLane(hn::MaxOfLanes(d, mx));
  a->min_key = min3(a->min_key, vmin, tail_min);
  a->max_key = max3(a->max_key, vmax, tail_max);
  a->pos = pos;
  a->count = count;
}

// ---- bf16 rows ----

constexpr int64_t kStepBf16 = 32;  // the reference's stop unit

// Appends the lanes of 16-bit keys k (elements pos...) selected by bits (bit i = lane i), widened.
HWY_INLINE int64_t append_bf16_lanes(uint64_t bits, V16 k, int64_t pos, SelectFilterArgs* a, int64_t count) {
  const D32 d;
  const V32 iota = hn::Iota(d, 0);
  const uint64_t half = live_bits(kLanes32, kLanes32);
  count = append_lanes(bits & half, widen_lower(k), hn::Add(iota, hn::Set(d, int32_t(pos))), a->keys, a->index, count);
  return append_lanes(bits >> kLanes32 & half, widen_upper(k), hn::Add(iota, hn::Set(d, int32_t(pos + kLanes32))),
                      a->keys, a->index, count);
}

// Folds the keys of kElems bf16 elements at p into the running min / max; true when one is >= lo.
template <int64_t kElems>
HWY_INLINE bool bf16_block_passes(const int16_t* p, V16 lo, V16* mn, V16* mx) {
  constexpr int64_t kVecs = kElems / kLanes16;
  const D16 d;
  V16 bmin = ordered_key_bf16(hn::LoadU(d, p)), bmax = bmin;
  for (int64_t j = 1; j < kVecs; ++j) {
    const V16 k = ordered_key_bf16(hn::LoadU(d, p + j * kLanes16));
    bmin = hn::Min(bmin, k);
    bmax = hn::Max(bmax, k);
  }
  *mn = hn::Min(*mn, bmin);
  *mx = hn::Max(*mx, bmax);
  return !hn::AllTrue(d, hn::Lt(bmax, lo));
}

// Mask bits of the keys >= lo of kElems bf16 elements at p (bits[0]: elements 0-63).
template <int64_t kElems>
HWY_INLINE void bf16_block_bits(const int16_t* p, V16 lo, uint64_t bits[2]) {
  const D16 d;
  bits[0] = bits[1] = 0;
  for (int64_t at = 0; at < kElems; at += kLanes16) {
    const V16 k = ordered_key_bf16(hn::LoadU(d, p + at));
    bits[at / 64] |= (~mask_bits(d, hn::Lt(k, lo)) & live_bits(kLanes16, kLanes16)) << (at % 64);
  }
}

template <int64_t kElems>
HWY_NOINLINE int64_t bf16_block_hits(const int16_t* row, int64_t pos, V16 lo, int64_t dense, SelectFilterArgs* a,
                                     int64_t count) {
  const D16 d;
  uint64_t bits[2];
  bf16_block_bits<kElems>(row + pos, lo, bits);
  if (int64_t(hwy::PopCount(bits[0]) + hwy::PopCount(bits[1])) >= dense) {
    for (int64_t at = 0; at < kElems; at += kLanes16)
      count = append_bf16_lanes(bits[at / 64] >> (at % 64), ordered_key_bf16(hn::LoadU(d, row + pos + at)), pos + at, a,
                                count);
    return count;
  }
  int32_t* keys = a->keys;
  int32_t* index = a->index;
  for (int h = 0; h < 2; ++h) {
    for (uint64_t b = bits[h]; b; b &= b - 1) {
      const int64_t i = pos + 64 * h + int64_t(hwy::Num0BitsBelowLS1Bit_Nonzero64(b));
      keys[count] = scalar_key_bf16(row[i]);
      index[count] = int32_t(i);
      ++count;
    }
  }
  return count;
}

void filter_bf16(SelectFilterArgs* a) {
  const D16 d;
  const int16_t* row = static_cast<const int16_t*>(a->row);
  // key > threshold  <=>  key >= threshold + 1, which fits int16 unless nothing or everything passes.
  const int64_t lo64 = int64_t(a->threshold) + 1;
  const bool enable = lo64 <= 32767;
  const V16 lo = hn::Set(d, int16_t(lo64 < -32768 ? -32768 : lo64 > 32767 ? 32767 : lo64));
  V16 mn = hn::Set(d, int16_t(32767)), mx = hn::Set(d, int16_t(-32768));
  const int64_t start = a->pos, end = a->end, cap = a->capacity;
  int64_t pos = start, count = a->count;
  constexpr int64_t kBlock = 4 * kStepBf16;
  const int64_t dense = dense_hits(a->expected_hits_per_1024, kBlock);
  while (pos + kBlock <= end && count + kBlock <= cap) {
    if (pos + kPrefetchBytes / 2 < end)
      for (int64_t b = 0; b < kBlock * 2; b += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(row + pos) + kPrefetchBytes + b);
    if (bf16_block_passes<kBlock>(row + pos, lo, &mn, &mx) && enable)
      count = bf16_block_hits<kBlock>(row, pos, lo, dense, a, count);
    pos += kBlock;
  }
  while (pos + kStepBf16 <= end && count + kStepBf16 <= cap) {
    if (bf16_block_passes<kStepBf16>(row + pos, lo, &mn, &mx) && enable)
      count = bf16_block_hits<kStepBf16>(row, pos, lo, 1, a, count);
    pos += kStepBf16;
  }
  const bool vectors = pos != start;
  int32_t tail_min = INT32_MAX, tail_max = INT32_MIN;
  if (pos < end && count + kStepBf16 <= cap) {  // the last, partial step
    for (; pos < end; ++pos) {
      const int32_t key = scalar_key_bf16(row[pos]);
      tail_min = key < tail_min ? key : tail_min;
      tail_max = key > tail_max ? key : tail_max;
      if (key > a->threshold) {
        a->keys[count] = key;
        a->index[count] = int32_t(pos);
        ++count;
      }
    }
  }
  if (vectors) {  // the int16 lanes start at 32767 / -32768, which are no keys seen
    tail_min = min3(tail_min, hn::GetLane(hn::MinOfLanes(d, mn)), INT32_MAX);
    tail_max = max3(tail_max, hn::GetLane(hn::MaxOfLanes(d, mx)), INT32_MIN);
  }
  a->min_key = min3(a->min_key, tail_min, INT32_MAX);
  a->max_key = max3(a->max_key, tail_max, INT32_MIN);
  a->pos = pos;
  a->count = count;
}

void select_filter(SelectFilterArgs* a) {
  if (a->elem_bytes == 2) {
    filter_bf16(a);
  } else {
    filter_f32(a);
  }
}

// ---- compaction ----

// Keeps key > kth, and key == kth among the first take_equal such entries, in order. Stores go to
// out <= i, behind the loads, so it works in place; whole vectors are loaded and stored (the arrays
// hold kSelectFilterSlack entries beyond n) and lanes past n are masked off.
int64_t select_compact(int32_t* keys, int32_t* index, int64_t n, int32_t kth, int64_t take_equal) {
  const D32 d;
  const V32 t = hn::Set(d, kth);
  int64_t out = 0, equal_left = take_equal;
  for (int64_t i = 0; i < n; i += kLanes32) {
    const uint64_t live = live_bits(n - i, kLanes32);
    const V32 k = hn::LoadU(d, keys + i), x = hn::LoadU(d, index + i);
    uint64_t eq = mask_bits(d, hn::Eq(k, t)) & live;
    if (eq) {
      eq = lowest_set_bits(eq, equal_left);
      equal_left -= int64_t(hwy::PopCount(eq));
    }
    const uint64_t keep = (mask_bits(d, hn::Gt(k, t)) & live) | eq;
    out = append_lanes(keep, k, x, keys, index, out);
  }
  return out;
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET

#endif  // include guard
