// The Highway kernels of the bf16 top-k path (src/select/topk_bf16.cc): sample keys, the collect pass
// (packed candidates above a threshold), the window keys of the candidates, counting at two thresholds,
// and the emit pass into the caller's outputs. Must match scalar/select_bf16.cc entry for entry; the
// collect pass steps in the reference's 32-element units like the bf16 filter (select_filter-inl.h).
#if defined(TESSERA_HWY_SELECT_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_SELECT_BF16_INL_H_
#undef TESSERA_HWY_SELECT_BF16_INL_H_
#else
#define TESSERA_HWY_SELECT_BF16_INL_H_
#endif

#include <hwy/highway.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/hwy/select_filter-inl.h"
#include "backends/cpu/hwy/select_lanes-inl.h"
#include "backends/cpu/hwy/select_streams-inl.h"
#include "backends/cpu/select_kernels.h"

// Built for the AVX2 and AVX3 targets only (levels.h); the baseline target of foreach_target gets none.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

void bf16_sample(const void* row, const int64_t* starts, int runs, int16_t* out) {
  const D16 d;
  const int16_t* r = static_cast<const int16_t*>(row);
  for (int j = 0; j < runs; ++j)
    for (int64_t i = 0; i < kStepBf16; i += kLanes16)
      hn::StoreU(ordered_key_bf16(hn::LoadU(d, r + starts[j] + i)), d, out + kStepBf16 * j + i);
}

// ---- collect pass ----

// Packed candidates of a vector of 16-bit keys, built by zipping (position, key) pairs: ZipLower /
// ZipUpper pair lanes within 128-bit blocks, so the keys' 64-bit quarters are first reordered (quarter
// b to 2b, quarter N/2 + b to 2b + 1) and the zips then yield lanes [0, N/2) and [N/2, N) in order.
struct PackedLayout {
  decltype(hn::IndicesFromVec(D32(), hn::Zero(D32()))) quarter_order;  // on the keys seen as int32 pairs
  V16 positions;                                                       // lane positions in the reordered layout
};
HWY_INLINE PackedLayout packed_layout() {
  HWY_ALIGN int32_t order[kLanes32];
  HWY_ALIGN int16_t positions[kLanes16];
  for (int64_t j = 0; j < kLanes32; ++j) {
    const int64_t q = j / 2, source = q % 2 == 0 ? q / 2 : kLanes32 / 4 + q / 2;
    order[j] = int32_t(2 * source + j % 2);
  }
  for (int64_t p = 0; p < kLanes16; ++p) positions[p] = int16_t(2 * order[p / 2] + p % 2);
  return {hn::IndicesFromVec(D32(), hn::Load(D32(), order)), hn::Load(D16(), positions)};
}

// Appends the packed candidates (key << 16 | element - base) of 16-bit keys k with key >= lo, for
// elements at offset `at` from base (at + lanes <= 65536). As int32 a packed candidate orders like its
// key, so the test runs on the packed lanes: packed >= lo << 16.
// pos: the lanes' positions (layout.positions + at), which a caller stepping through vectors keeps
// running instead of broadcasting `at` each time.
HWY_INLINE int64_t append_packed_at(V16 k, V16 pos, const PackedLayout& layout, V32 lo_packed, int32_t* packed,
                                    int64_t count) {
  const D32 d;
  const V16 kq = hn::BitCast(D16(), hn::TableLookupLanes(hn::BitCast(d, k), layout.quarter_order));
  const V32 p0 = hn::ZipLower(d, pos, kq), p1 = hn::ZipUpper(d, pos, kq);
  // mask_bits sets only the low kLanes32 bits, so xor complements them without a separate zero-extension.
  const uint64_t half = live_bits(kLanes32, kLanes32);
  const uint64_t b0 = mask_bits(d, hn::Lt(p0, lo_packed)) ^ half, b1 = mask_bits(d, hn::Lt(p1, lo_packed)) ^ half;
  hn::StoreU(gather(gather_of_bits(b0), p0), d, packed + count);
  count += int64_t(hwy::PopCount(b0));
  hn::StoreU(gather(gather_of_bits(b1), p1), d, packed + count);
  return count + int64_t(hwy::PopCount(b1));
}
HWY_INLINE int64_t append_packed(V16 k, int32_t at, const PackedLayout& layout, V32 lo_packed, int32_t* packed,
                                 int64_t count) {
  return append_packed_at(k, hn::Add(layout.positions, hn::Set(D16(), int16_t(uint16_t(at)))), layout, lo_packed,
                          packed, count);
}

// Expected hits per 1024 elements from which a collect pass gathers every vector (two per 128-element
// block: most blocks have some, and appending them one by one costs a mispredicted loop exit each).
constexpr int kDenseCollectPer1024 = 16;

HWY_INLINE int32_t packed_of(int32_t key, int64_t local) {
  return int32_t(uint32_t(uint16_t(key)) << 16 | uint32_t(local));
}

// Appends the candidates of a block with some: when there are at least `dense` of them, zips and
// gathers every vector; otherwise appends them one by one.
template <int64_t kElems>
HWY_NOINLINE int64_t collect_block_hits(const int16_t* row, int64_t pos, int64_t base, V16 lo, int64_t dense,
                                        const PackedLayout& layout, int32_t* packed, int64_t count) {
  const D16 d;
  uint64_t bits[2];
  bf16_block_bits<kElems>(row + pos, lo, bits);
  if (int64_t(hwy::PopCount(bits[0]) + hwy::PopCount(bits[1])) >= dense) {
    const V32 lo_packed = hn::ShiftLeft<16>(widen_lower(lo));
    for (int64_t at = 0; at < kElems; at += kLanes16)
      count = append_packed(ordered_key_bf16(hn::LoadU(d, row + pos + at)), int32_t(pos + at - base), layout, lo_packed,
                            packed, count);
    return count;
  }
  for (int h = 0; h < 2; ++h) {
    for (uint64_t b = bits[h]; b; b &= b - 1) {
      const int64_t i = pos + 64 * h + int64_t(hwy::Num0BitsBelowLS1Bit_Nonzero64(b));
      packed[count++] = packed_of(scalar_key_bf16(row[i]), i - base);
    }
  }
  return count;
}

struct CollectScan {
  int64_t pos, count;
  V16 mn, mx;
};

constexpr int64_t kCollectBlock = 4 * kStepBf16;

// One block of a collect pass. Dense passes (a couple of hits or more per block expected) zip and gather
// every vector, without a branch on the hits; sparse ones check the block's maximum first. lo: key >= lo
// passes; every key passes the check of a disabled pass.
template <bool kDense>
HWY_INLINE int64_t collect_block(const int16_t* row, int64_t pos, int64_t base, V16 lo, bool enable, int64_t dense,
                                 const PackedLayout& layout, V16* mn, V16* mx, int32_t* packed, int64_t count) {
  const D16 d;
  if (kDense) {
    const V32 lo_packed = hn::ShiftLeft<16>(widen_lower(lo));
    const V16 step = hn::Set(d, int16_t(kLanes16));
    V16 positions = hn::Add(layout.positions, hn::Set(d, int16_t(uint16_t(pos - base))));
#pragma GCC unroll 8
    for (int64_t at = 0; at < kCollectBlock; at += kLanes16) {
      const V16 k = ordered_key_bf16(hn::LoadU(d, row + pos + at));
      *mn = hn::Min(*mn, k);
      *mx = hn::Max(*mx, k);
      count = append_packed_at(k, positions, layout, lo_packed, packed, count);
      positions = hn::Add(positions, step);  // wraps like the int16 sum of append_packed
    }
  } else if (bf16_block_passes<kCollectBlock>(row + pos, lo, mn, mx) && enable) {
    count = collect_block_hits<kCollectBlock>(row, pos, base, lo, dense, layout, packed, count);
  }
  return count;
}

// The whole blocks of a collect pass in several streams (select_streams-inl.h): true when done, with
// scan->pos and scan->count advanced past them; false with nothing changed.
template <bool kDense>
HWY_INLINE bool collect_blocks_in_streams(const int16_t* row, int64_t end, int64_t base, int64_t cap, V16 lo,
                                          bool enable, int64_t dense, int expected_hits_per_1024, CollectScan* scan,
                                          int32_t* packed) {
  const int64_t nblocks = (end - scan->pos) / kCollectBlock;
  const StreamRegions r = stream_regions(scan->count, cap, kCollectBlock);
  if (!streams_pay(nblocks * kCollectBlock * 2, expected_hits_per_1024 * (end - scan->pos) / 1024, r)) return false;
  const PackedLayout layout = packed_layout();
  V16 mn = scan->mn, mx = scan->mx;
  int64_t counts[kSelectStreams];
  const bool done =
      scan_streams<kCollectBlock, 2>(row, scan->pos, nblocks, r.region, counts, [&](int s, int64_t pos, int64_t c) {
        return collect_block<kDense>(row, pos, base, lo, enable, dense, layout, &mn, &mx, packed + r.start(s), c);
      });
  if (!done) return false;
  const int64_t count = join_regions(r, counts, [&](int64_t from, int64_t to, int64_t n) {
    memmove(packed + to, packed + from, size_t(n) * sizeof(int32_t));
  });
  *scan = {scan->pos + nblocks * kCollectBlock, count, mn, mx};
  return true;
}

// The whole blocks of a collect pass, then its whole steps, up to the capacity.
template <bool kDense>
HWY_INLINE void collect_blocks(const int16_t* row, int64_t end, int64_t base, int64_t cap, V16 lo, bool enable,
                               int64_t dense, int expected_hits_per_1024, const char* next, int64_t next_bytes,
                               CollectScan* scan, int32_t* packed) {
  collect_blocks_in_streams<kDense>(row, end, base, cap, lo, enable, dense, expected_hits_per_1024, scan, packed);
  const PackedLayout layout = packed_layout();
  int64_t pos = scan->pos, count = scan->count;
  V16 mn = scan->mn, mx = scan->mx;
  NextRowPrefetch next_row(next, next_bytes, (end - pos) / kCollectBlock);
  while (pos + kCollectBlock <= end && count + kCollectBlock <= cap) {
    if (pos + kPrefetchBytes / 2 < end)
      for (int64_t b = 0; b < kCollectBlock * 2; b += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(row + pos) + kPrefetchBytes + b);
    next_row.step();
    count = collect_block<kDense>(row, pos, base, lo, enable, dense, layout, &mn, &mx, packed, count);
    pos += kCollectBlock;
  }
  next_row.rest();
  while (pos + kStepBf16 <= end && count + kStepBf16 <= cap) {
    if (bf16_block_passes<kStepBf16>(row + pos, lo, &mn, &mx) && enable)
      count = collect_block_hits<kStepBf16>(row, pos, base, lo, 1, layout, packed, count);
    pos += kStepBf16;
  }
  *scan = {pos, count, mn, mx};
}

void bf16_collect(SelectCollectArgs* a) {
  const D16 d;
  const int16_t* row = static_cast<const int16_t*>(a->row);
  // key > lo  <=>  key >= lo + 1, which fits int16 unless nothing passes (lo == 32767).
  const bool enable = a->lo < 32767;
  const int32_t lo1 = a->lo + 1;
  const V16 lo = hn::Set(d, int16_t(lo1 < -32768 ? -32768 : lo1 > 32767 ? 32767 : lo1));
  const int64_t start = a->pos, end = a->end, base = a->base, cap = a->capacity;
  int32_t* packed = a->packed;
  CollectScan scan = {start, a->count, hn::Set(d, int16_t(32767)), hn::Set(d, int16_t(-32768))};
  const int64_t dense = dense_hits(a->expected_hits_per_1024, 4 * kStepBf16);
  if (enable && a->expected_hits_per_1024 >= kDenseCollectPer1024) {
    collect_blocks<true>(row, end, base, cap, lo, enable, dense, a->expected_hits_per_1024, a->next, a->next_bytes,
                         &scan, packed);
  } else {
    collect_blocks<false>(row, end, base, cap, lo, enable, dense, a->expected_hits_per_1024, a->next, a->next_bytes,
                          &scan, packed);
  }
  int64_t pos = scan.pos, count = scan.count;
  int32_t tail_min = INT32_MAX, tail_max = INT32_MIN;
  if (pos < end && count + kStepBf16 <= cap) {  // the last, partial step
    for (; pos < end; ++pos) {
      const int32_t key = scalar_key_bf16(row[pos]);
      tail_min = key < tail_min ? key : tail_min;
      tail_max = key > tail_max ? key : tail_max;
      if (key > a->lo) packed[count++] = packed_of(key, pos - base);
    }
  }
  if (scan.pos != start) {  // the int16 lanes start at 32767 / -32768, which are no keys seen
    tail_min = min3(tail_min, hn::GetLane(hn::MinOfLanes(d, scan.mn)), INT32_MAX);
    tail_max = max3(tail_max, hn::GetLane(hn::MaxOfLanes(d, scan.mx)), INT32_MIN);
  }
  a->min_key = min3(a->min_key, tail_min, INT32_MAX);
  a->max_key = max3(a->max_key, tail_max, INT32_MIN);
  a->pos = pos;
  a->count = count;
}

// ---- window keys ----

int64_t bf16_window_keys(const int32_t* packed, int64_t n, int32_t lo, int32_t hi, int16_t* keys, int64_t* above) {
  const D32 d;
  const V32 vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
  int64_t count = 0, up = 0;
  for (int64_t i = 0; i < n; i += kLanes32) {
    const uint64_t live = live_bits(n - i, kLanes32);
    const V32 p = n - i >= kLanes32 ? hn::LoadU(d, packed + i) : load_partial(packed + i, n - i);
    const V32 key = hn::ShiftRight<16>(p);
    const uint64_t gt_hi = mask_bits(d, hn::Gt(key, vhi)) & live;
    const uint64_t in = mask_bits(d, hn::Gt(key, vlo)) & live & ~gt_hi;
    up += int64_t(hwy::PopCount(gt_hi));
    hn::StoreU(narrow(gather(gather_of_bits(in), key)), D16Half(), keys + count);
    count += int64_t(hwy::PopCount(in));
  }
  *above = up;
  return count;
}

// ---- counting ----

// Vector counters of int16 lanes (a lane counts at most one per vector), summed into int64 every chunk,
// before they could overflow.
void bf16_count2(const int16_t* keys, int64_t n, const int32_t t[2], int64_t counts[2]) {
  const D16 d;
  const D32 d32;
  constexpr int64_t kChunk = 16384 * kLanes16;  // vectors per lane counter < 32768
  const V16 t0 = hn::Set(d, int16_t(t[0])), t1 = hn::Set(d, int16_t(t[1]));
  int64_t c0 = 0, c1 = 0, i = 0;
  while (n - i >= kLanes16) {
    const int64_t stop = n - i > kChunk ? i + kChunk : n;
    V16 a0 = hn::Zero(d), a1 = hn::Zero(d), b0 = hn::Zero(d), b1 = hn::Zero(d);
    for (; i + 2 * kLanes16 <= stop; i += 2 * kLanes16) {
      const V16 k0 = hn::LoadU(d, keys + i), k1 = hn::LoadU(d, keys + i + kLanes16);
      a0 = hn::Sub(a0, hn::VecFromMask(d, hn::Gt(k0, t0)));
      a1 = hn::Sub(a1, hn::VecFromMask(d, hn::Gt(k1, t0)));
      b0 = hn::Sub(b0, hn::VecFromMask(d, hn::Gt(k0, t1)));
      b1 = hn::Sub(b1, hn::VecFromMask(d, hn::Gt(k1, t1)));
    }
    if (i + kLanes16 <= stop) {
      const V16 k0 = hn::LoadU(d, keys + i);
      a0 = hn::Sub(a0, hn::VecFromMask(d, hn::Gt(k0, t0)));
      b0 = hn::Sub(b0, hn::VecFromMask(d, hn::Gt(k0, t1)));
      i += kLanes16;
    }
    // Every lane counter stays below 32768, so the signed widening is exact.
    const V32 sa = hn::Add(hn::Add(widen_lower(a0), widen_upper(a0)), hn::Add(widen_lower(a1), widen_upper(a1)));
    const V32 sb = hn::Add(hn::Add(widen_lower(b0), widen_upper(b0)), hn::Add(widen_lower(b1), widen_upper(b1)));
    c0 += hn::GetLane(hn::SumOfLanes(d32, sa));
    c1 += hn::GetLane(hn::SumOfLanes(d32, sb));
  }
  for (; i < n; ++i) {
    c0 += keys[i] > t[0];
    c1 += keys[i] > t[1];
  }
  counts[0] = c0;
  counts[1] = c1;
}

// ---- emit ----

template <bool kIdx64, bool kValues, bool kKeys>
void emit_impl(SelectEmitArgs* a) {
  const D32 d;
  using D64 = hn::Rebind<int64_t, hn::Half<D32>>;
  const D64 d64;
  constexpr int64_t kHalf = kLanes32 / 2;
  int32_t* const index32 = a->index32;
  int64_t* const index64 = a->index64;
  int16_t* const values = reinterpret_cast<int16_t*>(a->values);
  int32_t* const keys = a->keys;
  const int64_t n = a->n, selected = a->selected;
  const V32 kth = hn::Set(d, a->kth), low16 = hn::Set(d, 0xFFFF);
  // int32 indices carry the offset from the start (the sum wraps like the int32 store it becomes).
  const V32 base32 = hn::Set(d, int32_t(uint32_t(a->base) + uint32_t(a->offset)));
  const auto base64 = hn::Set(d64, a->base + a->offset);
  int64_t equal_left = a->equal_left, count = a->count;
  for (int64_t i = 0; i < n; i += kLanes32) {
    const uint64_t live = live_bits(n - i, kLanes32);
    const V32 p = n - i >= kLanes32 ? hn::LoadU(d, a->packed + i) : load_partial(a->packed + i, n - i);
    const V32 key = hn::ShiftRight<16>(p);
    uint64_t keep = mask_bits(d, hn::Gt(key, kth)) & live;
    uint64_t eq = mask_bits(d, hn::Eq(key, kth)) & live;
    if (eq) {
      eq = lowest_set_bits(eq, equal_left);  // the lowest indices win ties
      equal_left -= int64_t(hwy::PopCount(eq));
      keep |= eq;
    }
    if (!keep) continue;
    const LaneGather g = gather_of_bits(keep);
    const V32 local = gather(g, hn::And(p, low16));
    if (kIdx64) {
      store_first(d64, hn::Add(hn::PromoteTo(d64, hn::LowerHalf(hn::Half<D32>(), local)), base64), index64 + count,
                  selected - count);
      store_first(d64, hn::Add(hn::PromoteTo(d64, hn::UpperHalf(hn::Half<D32>(), local)), base64),
                  index64 + count + kHalf, selected - count - kHalf);
    } else {
      store_first(d, hn::Add(local, base32), index32 + count, selected - count);
    }
    if (kValues || kKeys) {
      const V32 ck = gather(g, key);
      // The key map is its own inverse: bits = key ^ ((key >> 15) & 0x7FFF) on the low 16 bits.
      if (kValues)
        store_first(D16Half(), narrow(hn::Xor(ck, hn::And(hn::ShiftRight<15>(ck), hn::Set(d, 0x7FFF)))), values + count,
                    selected - count);
      if (kKeys) store_first(d, ck, keys + count, selected - count);
    }
    count += int64_t(hwy::PopCount(keep));
  }
  a->equal_left = equal_left;
  a->count = count;
}

void bf16_emit(SelectEmitArgs* a) {
  if (a->keys) {
    if (a->index64) {
      a->values ? emit_impl<true, true, true>(a) : emit_impl<true, false, true>(a);
    } else {
      a->values ? emit_impl<false, true, true>(a) : emit_impl<false, false, true>(a);
    }
  } else if (a->index64) {
    a->values ? emit_impl<true, true, false>(a) : emit_impl<true, false, false>(a);
  } else {
    a->values ? emit_impl<false, true, false>(a) : emit_impl<false, false, false>(a);
  }
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET

#endif  // include guard
