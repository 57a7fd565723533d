// The ep kernels written once with Highway, for AVX2 and AVX-512: streaming copies into other processes'
// receive regions, bf16 reductions in fp32 and the per-128 FP8 cast of low-latency dispatch. Same bits as
// scalar/ep_kernels.cc (ep_kernels.h fixes the numerics; every step here is the same IEEE operation or
// integer rounding, lane by lane).
//
// bf16 values are widened in place: a vector of 2m bf16 codes seen as m 32-bit lanes holds the even
// codes in the low halves and the odd ones in the high halves, so `lane << 16` and `lane & 0xFFFF0000`
// are two fp32 vectors, and each rounded result goes back into the half it came from. No lane-crossing
// shuffles; every kernel is element-wise (or a max), so the order of values inside a vector is free.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/ep_kernels.cc"
#include "backends/cpu/ep_kernels.h"

#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <stdint.h>
#include <string.h>

// Only the targets of tessera levels (levels.h); the baseline target foreach_target.h also compiles has
// 1-lane vectors this layout cannot use, and nothing selects it.
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;

using DU8 = hn::ScalableTag<uint8_t>;
using DU16 = hn::ScalableTag<uint16_t>;
using DI16 = hn::ScalableTag<int16_t>;
using DU32 = hn::Repartition<uint32_t, DU16>;
using DI32 = hn::Repartition<int32_t, DU16>;
using DF = hn::Repartition<float, DU16>;
using VU16 = hn::Vec<DU16>;
using VU32 = hn::Vec<DU32>;
using VI32 = hn::Vec<DI32>;
using VF = hn::Vec<DF>;

VF even_values(VU32 codes) {
  return hn::BitCast(DF(), hn::ShiftLeft<16>(codes));
}
VF odd_values(VU32 codes) {
  return hn::BitCast(DF(), hn::And(codes, hn::Set(DU32(), 0xFFFF0000u)));
}

// fp32 -> bf16 rounded to nearest even, the code in the upper half of each lane; NaN -> 0x7FC0.
VU32 bf16_in_upper_half(VF x) {
  const DU32 du32;
  const DI32 di32;
  const VU32 u = hn::BitCast(du32, x);
  const VU32 lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  const VU32 rounded = hn::Add(hn::Add(u, hn::Set(du32, 0x7FFFu)), lsb);
  const VI32 magnitude = hn::BitCast(di32, hn::And(u, hn::Set(du32, 0x7FFFFFFFu)));
  const auto nan = hn::RebindMask(du32, hn::Gt(magnitude, hn::Set(di32, 0x7F800000)));
  return hn::IfThenElse(nan, hn::Set(du32, 0x7FC00000u), rounded);
}

// The even and odd fp32 results back into one vector of bf16 codes, each in its original place.
VU16 to_bf16(VF even, VF odd) {
  const DU16 du16;
  return hn::OddEven(hn::BitCast(du16, bf16_in_upper_half(odd)),
                     hn::BitCast(du16, hn::ShiftRight<16>(bf16_in_upper_half(even))));
}

// A reduction step covers two vectors of bf16 codes: 64 bytes on AVX2 (whole cache lines for the
// streaming stores), 128 on AVX-512; four independent fp32 sums.
constexpr int64_t kStepCodes = 2 * HWY_LANES(uint16_t);

struct Sums {
  VF even0, odd0, even1, odd1;
};

Sums zero_sums() {
  const DF df;
  return {hn::Zero(df), hn::Zero(df), hn::Zero(df), hn::Zero(df)};
}

// Where a step reads its codes: straight from the rows, or, for the short last step, from zero-padded
// copies of what is left.
struct WholeStep {
  int64_t h;
  VU16 load(const uint16_t* row, int half) const {
    return hn::LoadU(DU16(), row + h + half * int64_t(hn::Lanes(DU16())));
  }
};

struct ShortStep {
  int64_t h, left;
  VU16 load(const uint16_t* row, int half) const {
    alignas(64) uint16_t buf[kStepCodes / 2] = {};
    const int64_t lanes = int64_t(hn::Lanes(DU16())), first = half * lanes;
    const int64_t count = left - first < 0 ? 0 : left - first > lanes ? lanes : left - first;
    memcpy(buf, row + h + first, size_t(count) * 2);
    return hn::Load(DU16(), buf);
  }
};

// Rows are prefetched 4 KiB ahead: the combines' rows (one per rank or top-k lane, scattered over
// receive regions) give the hardware prefetcher too little to go on, and with 256-bit vectors the
// out-of-order window alone keeps too few lines in flight (AVX2 ran at ~60% of AVX-512's speed from DRAM).
constexpr int64_t kAheadCodes = 2048;

template <class Source>
void add_row(const Source& src, const uint16_t* row, Sums& s) {
  const VU32 c0 = hn::BitCast(DU32(), src.load(row, 0)), c1 = hn::BitCast(DU32(), src.load(row, 1));
  s.even0 = hn::Add(s.even0, even_values(c0));
  s.odd0 = hn::Add(s.odd0, odd_values(c0));
  s.even1 = hn::Add(s.even1, even_values(c1));
  s.odd1 = hn::Add(s.odd1, odd_values(c1));
}

// A multiply, then an add (never fused: the file is compiled with -ffp-contract=off).
template <class Source>
void add_weighted_row(const Source& src, const uint16_t* row, VF w, Sums& s) {
  const VU32 c0 = hn::BitCast(DU32(), src.load(row, 0)), c1 = hn::BitCast(DU32(), src.load(row, 1));
  s.even0 = hn::Add(s.even0, hn::Mul(w, even_values(c0)));
  s.odd0 = hn::Add(s.odd0, hn::Mul(w, odd_values(c0)));
  s.even1 = hn::Add(s.even1, hn::Mul(w, even_values(c1)));
  s.odd1 = hn::Add(s.odd1, hn::Mul(w, odd_values(c1)));
}

template <class Source>
Sums sum_step(const Source& src, const uint16_t* const* rows, int num_rows, const uint16_t* bias0,
              const uint16_t* bias1, bool prefetch) {
  Sums s = zero_sums();
  if (bias0) add_row(src, bias0, s);
  if (bias1) add_row(src, bias1, s);
  for (int i = 0; i < num_rows; ++i) {
    if (prefetch) {
      for (int64_t line = 0; line < kStepCodes; line += 32) hwy::Prefetch(rows[i] + src.h + line + kAheadCodes);
    }
    add_row(src, rows[i], s);
  }
  return s;
}

template <class Source>
Sums weighted_sum_step(const Source& src, const uint16_t* const* rows, const float* weights, int num_rows,
                       bool prefetch) {
  Sums s = zero_sums();
  for (int i = 0; i < num_rows; ++i) {
    if (prefetch) {
      for (int64_t line = 0; line < kStepCodes; line += 32) hwy::Prefetch(rows[i] + src.h + line + kAheadCodes);
    }
    add_weighted_row(src, rows[i], hn::Set(DF(), weights[i]), s);
  }
  return s;
}

void store_step(const Sums& s, uint16_t* out, bool stream) {
  const DU16 du16;
  const VU16 r0 = to_bf16(s.even0, s.odd0), r1 = to_bf16(s.even1, s.odd1);
  const int64_t lanes = int64_t(hn::Lanes(du16));
  if (stream) {
    hn::Stream(r0, du16, out);
    hn::Stream(r1, du16, out + lanes);
  } else {
    hn::StoreU(r0, du16, out);
    hn::StoreU(r1, du16, out + lanes);
  }
}

void store_short_step(const Sums& s, uint16_t* out, int64_t count) {
  alignas(64) uint16_t buf[kStepCodes];
  store_step(s, buf, false);
  memcpy(out, buf, size_t(count) * 2);
}

void copy(void* dst, const void* src, size_t bytes, int streaming) {
  if (!streaming || bytes < 512) {
    memcpy(dst, src, bytes);
    return;
  }
  const DU8 d8;
  const size_t lanes = hn::Lanes(d8);
  uint8_t* d = static_cast<uint8_t*>(dst);
  const uint8_t* s = static_cast<const uint8_t*>(src);
  const size_t head = (64 - (uintptr_t(d) & 63)) & 63;  // whole cache lines get the streaming stores
  memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  size_t i = 0;
  for (; i + 4 * lanes <= bytes; i += 4 * lanes) {
    const auto a = hn::LoadU(d8, s + i), b = hn::LoadU(d8, s + i + lanes);
    const auto c = hn::LoadU(d8, s + i + 2 * lanes), e = hn::LoadU(d8, s + i + 3 * lanes);
    hn::Stream(a, d8, d + i);
    hn::Stream(b, d8, d + i + lanes);
    hn::Stream(c, d8, d + i + 2 * lanes);
    hn::Stream(e, d8, d + i + 3 * lanes);
  }
  for (; i + lanes <= bytes; i += lanes) hn::Stream(hn::LoadU(d8, s + i), d8, d + i);
  memcpy(d + i, s + i, bytes - i);
}

void store_fence() {
  hwy::FlushStream();
}

void reduce_bf16(uint16_t* out, const uint16_t* const* rows, int num_rows, const uint16_t* bias0, const uint16_t* bias1,
                 int64_t n, int streaming) {
  // Half-line (AVX2) streaming stores pay as well as whole-line ones once the rows are prefetched
  // (without the prefetches both ran at about half the speed of plain stores from DRAM).
  const bool stream = streaming && (uintptr_t(out) & 63) == 0;
  int64_t h = 0;
  for (; h + kStepCodes <= n; h += kStepCodes)
    store_step(sum_step(WholeStep{h}, rows, num_rows, bias0, bias1, true), out + h, stream);
  if (h < n) store_short_step(sum_step(ShortStep{h, n - h}, rows, num_rows, bias0, bias1, false), out + h, n - h);
}

void weighted_reduce_bf16(uint16_t* out, const uint16_t* const* rows, const float* weights, int num_rows, int64_t n) {
  int64_t h = 0;
  for (; h + kStepCodes <= n; h += kStepCodes)
    store_step(weighted_sum_step(WholeStep{h}, rows, weights, num_rows, true), out + h, false);
  if (h < n) store_short_step(weighted_sum_step(ShortStep{h, n - h}, rows, weights, num_rows, false), out + h, n - h);
}

// e4m3fn codes (nearest even, saturating at 448, NaN -> 0x7F) with the sign, one per 32-bit lane
// (see scalar/ep_kernels.cc: to_e4m3_sat).
VI32 e4m3_codes(VF x) {
  const DI32 di32;
  const DF df;
  const VI32 u = hn::BitCast(di32, x);
  const VI32 a = hn::And(u, hn::Set(di32, 0x7FFFFFFF));
  const VI32 sign = hn::And(hn::ShiftRight<24>(u), hn::Set(di32, 0x80));
  // Below 2^-6: the multiple k of 2^-9 nearest |x| (ties to even). The scalar code rounds by adding and
  // subtracting 2^14, then takes k = t * 512; the sum 2^14 + k * 2^-9 already holds k in its mantissa.
  const VI32 big_bits = hn::Set(di32, 0x46800000);  // 16384.0f
  const VI32 subnormal = hn::Sub(hn::BitCast(di32, hn::Add(hn::BitCast(df, a), hn::BitCast(df, big_bits))), big_bits);
  // From 2^-6: rebias the exponent and round the mantissa to 3 bits (nearest even).
  const VI32 v = hn::Sub(a, hn::Set(di32, 120 << 23));
  const VI32 lsb = hn::And(hn::ShiftRight<20>(v), hn::Set(di32, 1));
  const VI32 normal = hn::ShiftRight<20>(hn::Add(hn::Add(v, hn::Set(di32, 0x7FFFF)), lsb));
  VI32 code = hn::IfThenElse(hn::Lt(a, hn::Set(di32, 0x3C800000)), subnormal, normal);
  code = hn::Min(code, hn::Set(di32, 0x7E));
  code = hn::IfThenElse(hn::Gt(a, hn::Set(di32, 0x7F800000)), hn::Set(di32, 0x7F), code);
  return hn::Or(code, sign);
}

// max |x| over 128 bf16 codes as the bf16 code of the result, NaN ignored: on non-negative non-NaN
// values the order of the codes is the order of the values.
uint32_t block_amax_code(const uint16_t* x) {
  const DI16 di16;
  const int64_t step = int64_t(hn::Lanes(di16));
  auto m = hn::Zero(di16);
  for (int64_t i = 0; i < 128; i += step) {
    const auto magnitude = hn::And(hn::BitCast(di16, hn::LoadU(DU16(), x + i)), hn::Set(di16, 0x7FFF));
    m = hn::Max(m, hn::IfThenZeroElse(hn::Gt(magnitude, hn::Set(di16, 0x7F80)), magnitude));
  }
  return uint32_t(hn::GetLane(hn::MaxOfLanes(di16, m)));
}

void cast_block(uint8_t* out, const uint16_t* x, float inverse) {
  const DU16 du16;
  const hn::Rebind<uint16_t, DI32> dpairs;  // one 16-bit lane per 32-bit lane: two e4m3 codes
  const hn::Repartition<uint8_t, decltype(dpairs)> dbytes;
  const VF inv = hn::Set(DF(), inverse);
  const int64_t step = int64_t(hn::Lanes(du16));
  for (int64_t i = 0; i < 128; i += step) {
    const VU32 c = hn::BitCast(DU32(), hn::LoadU(du16, x + i));
    const VI32 even = e4m3_codes(hn::Mul(even_values(c), inv));
    const VI32 odd = e4m3_codes(hn::Mul(odd_values(c), inv));
    const auto pairs = hn::DemoteTo(dpairs, hn::Or(even, hn::ShiftLeft<8>(odd)));
    hn::StoreU(hn::BitCast(dbytes, pairs), dbytes, out + i);
  }
}

void e4m3_sat_mul(uint8_t* out, const float* x, int64_t n, float mul) {
  const DF df;
  const hn::Rebind<uint8_t, DI32> dbytes;  // one code per 32-bit lane
  const VF m = hn::Set(df, mul);
  const int64_t step = int64_t(hn::Lanes(df));
  int64_t i = 0;
  for (; i + step <= n; i += step)
    hn::StoreU(hn::DemoteTo(dbytes, e4m3_codes(hn::Mul(hn::LoadU(df, x + i), m))), dbytes, out + i);
  if (i < n) {
    alignas(64) float in[64] = {};
    alignas(64) uint8_t codes[64];
    memcpy(in, x + i, size_t(n - i) * 4);
    hn::Store(hn::DemoteTo(dbytes, e4m3_codes(hn::Mul(hn::Load(df, in), m))), dbytes, codes);
    memcpy(out + i, codes, size_t(n - i));
  }
}

// dtype.h's f32_to_bf16 per lane: nearest even on the bits, NaN -> 0x7FC0 with its sign; a short tail
// through a padded copy.
void round_bf16(uint16_t* out, const float* x, int64_t n) {
  const DF df;
  const DU32 du32;
  const DI32 di32;
  const hn::Rebind<uint16_t, DI32> dhalf;  // one bf16 code per 32-bit lane
  const int64_t step = int64_t(hn::Lanes(df));
  auto round = [&](VF v) {
    const VU32 u = hn::BitCast(du32, v);
    const VU32 rounded = hn::ShiftRight<16>(
        hn::Add(hn::Add(u, hn::Set(du32, 0x7FFFu)), hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u))));
    const VI32 magnitude = hn::BitCast(di32, hn::And(u, hn::Set(du32, 0x7FFFFFFFu)));
    const auto nan = hn::RebindMask(du32, hn::Gt(magnitude, hn::Set(di32, 0x7F800000)));
    const VU32 quiet = hn::Or(hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 0x8000u)), hn::Set(du32, 0x7FC0u));
    return hn::DemoteTo(dhalf, hn::BitCast(di32, hn::IfThenElse(nan, quiet, rounded)));  // codes <= 0xFFFF
  };
  int64_t i = 0;
  for (; i + step <= n; i += step) hn::StoreU(round(hn::LoadU(df, x + i)), dhalf, out + i);
  if (i < n) {
    alignas(64) float in[64] = {};
    alignas(64) uint16_t codes[64];
    memcpy(in, x + i, size_t(n - i) * 4);
    hn::Store(round(hn::Load(df, in)), dhalf, codes);
    memcpy(out + i, codes, size_t(n - i) * 2);
  }
}

float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

// The smallest power of two >= x > 0 as an exponent byte, clamped to [1, 254].
uint32_t ceil_exponent(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u &= 0x7FFFFFFFu;
  uint32_t e = u >> 23;
  if ((u & 0x7FFFFFu) != 0 && e != 0) ++e;
  return e < 1 ? 1 : e > 254 ? 254 : e;
}

// Three passes per chunk of up to 64 blocks, so no block waits on the one before: every block's amax,
// the scales and their inverses (a vector of blocks per division), then the conversions. A short last
// block goes through a zero-padded copy (zeros change no amax).
void cast_e4m3(uint8_t* out, float* scales, uint8_t* exponents, const uint16_t* x, int64_t n, int round_scale) {
  constexpr int kChunk = 64;
  const DF df;
  alignas(64) float amax[kChunk] = {}, scale[kChunk], inverse[kChunk];
  alignas(64) uint16_t tail_in[128];
  alignas(64) uint8_t tail_out[128];
  const int64_t blocks = (n + 127) / 128, tail = n % 128;
  if (tail) {
    memset(tail_in, 0, sizeof tail_in);
    memcpy(tail_in, x + (blocks - 1) * 128, size_t(tail) * 2);
  }
  for (int64_t c0 = 0; c0 < blocks; c0 += kChunk) {
    const int nb = int(blocks - c0 < kChunk ? blocks - c0 : kChunk);
    const bool short_last = tail && c0 + nb == blocks;
    for (int b = 0; b < nb; ++b) {
      const uint16_t* src = short_last && b == nb - 1 ? tail_in : x + (c0 + b) * 128;
      amax[b] = float_of(block_amax_code(src) << 16);
    }
    if (round_scale) {
      for (int b = 0; b < nb; ++b) {
        const float a = amax[b] > 1e-4f ? amax[b] : 1e-4f;
        const uint32_t e = ceil_exponent(a / 448.0f);
        scale[b] = float_of(e << 23);
        if (exponents) exponents[c0 + b] = uint8_t(e);
        inverse[b] = float_of((254u - e) << 23);
      }
    } else {
      for (int b = 0; b < nb; b += int(hn::Lanes(df))) {
        const VF a = hn::Max(hn::Load(df, amax + b), hn::Set(df, 1e-4f));
        hn::Store(hn::Div(a, hn::Set(df, 448.0f)), df, scale + b);
        hn::Store(hn::Div(hn::Set(df, 448.0f), a), df, inverse + b);
      }
    }
    if (scales) memcpy(scales + c0, scale, size_t(nb) * 4);
    for (int b = 0; b < nb; ++b) {
      if (short_last && b == nb - 1) {
        cast_block(tail_out, tail_in, inverse[b]);
        memcpy(out + (c0 + b) * 128, tail_out, size_t(tail));
      } else {
        cast_block(out + (c0 + b) * 128, x + (c0 + b) * 128, inverse[b]);
      }
    }
  }
}

}  // namespace

const EpKernels* ep_kernel_table() {
  static constexpr EpKernels kKernels{HWY_TARGET == HWY_AVX2   ? "hwy_avx2"
                                      : HWY_TARGET == HWY_NEON ? "hwy_neon"
                                                               : "hwy_avx3",
                                      copy,
                                      store_fence,
                                      reduce_bf16,
                                      weighted_reduce_bf16,
                                      cast_e4m3,
                                      e4m3_sat_mul,
                                      round_bf16};
  return &kKernels;
}

}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"

namespace tessera::cpu {
const EpKernels* ep_kernels_hwy(Isa isa) {
  TESSERA_HWY_SELECT(isa, ep_kernel_table);
}
}  // namespace tessera::cpu
#endif
