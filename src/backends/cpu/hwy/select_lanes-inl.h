// Lane tools of the Highway top-k kernels (select_filter-inl.h, select_bf16-inl.h): ordered keys, mask
// bits, and moving selected lanes to the front of a vector in order ("gathering" them, the compress of
// a filter). AVX-512 has vpcompressd; AVX2 has none, so there a mask of 8 lanes indexes an 8 KiB table of
// lane orders, loaded as a vpermd index once and applied to every vector sharing the mask (keys and
// positions), one load plus one permute per vector.
#if defined(TESSERA_HWY_SELECT_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_SELECT_LANES_INL_H_
#undef TESSERA_HWY_SELECT_LANES_INL_H_
#else
#define TESSERA_HWY_SELECT_LANES_INL_H_
#endif

#include <hwy/highway.h>
#include <stdint.h>
#include <string.h>

// Built for the AVX2 and AVX3 targets only (levels.h); the baseline target of foreach_target gets none.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {  // included by select_kernels.cc only: nothing leaves its translation unit

using D32 = hn::ScalableTag<int32_t>;
using D16 = hn::ScalableTag<int16_t>;
using V32 = hn::Vec<D32>;
using V16 = hn::Vec<D16>;
constexpr int64_t kLanes32 = int64_t(hn::MaxLanes(D32()));
constexpr int64_t kLanes16 = int64_t(hn::MaxLanes(D16()));

// The ordered keys of select_kernels.h: bits ^ ((bits >> 31) & 0x7FFFFFFF), on 16 bits for bf16.
HWY_INLINE V32 ordered_key_f32(V32 u) {
  return hn::Xor(u, hn::And(hn::ShiftRight<31>(u), hn::Set(D32(), 0x7FFFFFFF)));
}
HWY_INLINE V16 ordered_key_bf16(V16 h) {
  return hn::Xor(h, hn::And(hn::ShiftRight<15>(h), hn::Set(D16(), 0x7FFF)));
}
HWY_INLINE int32_t scalar_key_f32(int32_t bits) {
  const uint32_t u = uint32_t(bits);
  return int32_t(u ^ (uint32_t(int32_t(u) >> 31) & 0x7FFFFFFFu));
}
HWY_INLINE int32_t scalar_key_bf16(int16_t bits) {
  const uint16_t h = uint16_t(bits);
  return int32_t(int16_t(uint16_t(h ^ (uint16_t(int16_t(h) >> 15) & 0x7FFFu))));
}

HWY_INLINE int32_t min3(int32_t a, int32_t b, int32_t c) {
  const int32_t m = a < b ? a : b;
  return m < c ? m : c;
}
HWY_INLINE int32_t max3(int32_t a, int32_t b, int32_t c) {
  const int32_t m = a > b ? a : b;
  return m > c ? m : c;
}

// Lane i of the mask as bit i.
template <class D>
HWY_INLINE uint64_t mask_bits(D d, hn::Mask<D> m) {
#if HWY_TARGET == HWY_AVX2
  // StoreMaskBits goes through a byte copy that GCC turns into partial-register moves on every call;
  // the movemask value it copies is already zero-extended (Highway 1.0.3's x86_256-inl.h).
  (void)d;
  return hn::detail::BitsFromMask(m);
#else
  uint64_t bits = 0;
  hn::StoreMaskBits(d, m, reinterpret_cast<uint8_t*>(&bits));
  return bits;
#endif
}

// The lowest `lanes` bits set: the live lanes of a vector that ends `lanes` entries before its data does.
HWY_INLINE uint64_t live_bits(int64_t lanes, int64_t vector_lanes) {
  return lanes >= vector_lanes ? (vector_lanes == 64 ? ~0ull : (1ull << vector_lanes) - 1) : (1ull << lanes) - 1;
}

// Keeps the lowest `n` set bits of `bits` (the earliest of tied lanes win).
HWY_INLINE uint64_t lowest_set_bits(uint64_t bits, int64_t n) {
  if (n <= 0) return 0;
  int64_t extra = int64_t(hwy::PopCount(bits)) - n;
  while (extra-- > 0) bits &= ~(1ull << (63 - hwy::Num0BitsAboveMS1Bit_Nonzero64(bits)));
  return bits;
}

// Int16 lanes [0, N/2) or [N/2, N) sign-extended to int32 lanes.
HWY_INLINE V32 widen_lower(V16 v) {
  return hn::PromoteTo(D32(), hn::LowerHalf(hn::Half<D16>(), v));
}
HWY_INLINE V32 widen_upper(V16 v) {
  return hn::PromoteTo(D32(), hn::UpperHalf(hn::Half<D16>(), v));
}

// Int32 lanes narrowed to int16 (the values fit).
using D16Half = hn::Rebind<int16_t, D32>;
HWY_INLINE hn::Vec<D16Half> narrow(V32 v) {
  return hn::DemoteTo(D16Half(), v);
}

// A vector of int32 entries of which only `lanes` < kLanes32 exist: the rest read as zero.
HWY_INLINE V32 load_partial(const int32_t* p, int64_t lanes) {
  HWY_ALIGN int32_t buf[kLanes32] = {};
  memcpy(buf, p, size_t(lanes) * sizeof(int32_t));
  return hn::Load(D32(), buf);
}

// Stores the first `room` lanes of v at out (all of them when room >= the vector's lanes).
template <class D, typename T>
HWY_INLINE void store_first(D d, hn::Vec<D> v, T* out, int64_t room) {
  constexpr int64_t kLanes = int64_t(hn::MaxLanes(D()));
  if (room >= kLanes) {
    hn::StoreU(v, d, out);
  } else if (room > 0) {
    HWY_ALIGN T buf[kLanes];
    hn::Store(v, d, buf);
    memcpy(out, buf, size_t(room) * sizeof(T));
  }
}

#if HWY_TARGET == HWY_AVX2

// kLaneOrder[m]: the positions of the set bits of m in increasing order, then zeros. Stored as int32
// lanes (8 KiB) so an index vector is one plain load, not a load plus a widening shuffle per gather.
struct LaneOrderTable {
  int32_t order[256][8];
};
constexpr LaneOrderTable make_lane_order_table() {
  LaneOrderTable t{};
  for (int m = 0; m < 256; ++m) {
    int out = 0;
    for (int lane = 0; lane < 8; ++lane)
      if (m >> lane & 1) t.order[m][out++] = lane;
  }
  return t;
}
alignas(64) constexpr LaneOrderTable kLaneOrder = make_lane_order_table();

// The lanes selected by 8 mask bits, as a permutation applied to any int32 vector. bits < 256: every
// caller masks them to the vector's lanes already (masking again here costs two ops per gather in the
// dense loops, the compiler not knowing a movemask's range).
struct LaneGather {
  hn::Indices256<int32_t> index;
};
HWY_INLINE LaneGather gather_of_bits(uint64_t bits) {
  return {hn::IndicesFromVec(D32(), hn::Load(D32(), kLaneOrder.order[bits]))};
}
HWY_INLINE LaneGather gather_of_mask(hn::Mask<D32> m) {
  return gather_of_bits(mask_bits(D32(), m));
}
HWY_INLINE V32 gather(const LaneGather& g, V32 v) {
  return hn::TableLookupLanes(v, g.index);
}

#else  // AVX-512: compress in a register (the memory form is microcoded and slow on AMD Zen 4/5)

struct LaneGather {
  hn::Mask<D32> mask;
};
HWY_INLINE LaneGather gather_of_bits(uint64_t bits) {
  return {hn::LoadMaskBits(D32(), reinterpret_cast<const uint8_t*>(&bits))};
}
HWY_INLINE LaneGather gather_of_mask(hn::Mask<D32> m) {
  return {m};
}
HWY_INLINE V32 gather(const LaneGather& g, V32 v) {
  return hn::Compress(v, g.mask);
}

#endif

// Appends the lanes of keys / positions selected by `bits` at keys[count...] / index[count...] (whole
// vectors are stored: the arrays hold slack beyond their capacity); returns the new count.
HWY_INLINE int64_t append_lanes(uint64_t bits, V32 keys, V32 positions, int32_t* out_keys, int32_t* out_index,
                                int64_t count) {
  const LaneGather g = gather_of_bits(bits);
  hn::StoreU(gather(g, keys), D32(), out_keys + count);
  hn::StoreU(gather(g, positions), D32(), out_index + count);
  return count + int64_t(hwy::PopCount(bits));
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET

#endif  // include guard
