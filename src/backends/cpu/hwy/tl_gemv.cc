// The tile-language GEMV (tl_gemv.h) at the AVX2 and AVX-512 levels, written once with Highway. These
// levels have no bf16 dot product: weights widen to fp32 and meet the activations in FMAs. A T.gemm per
// K tile hands the kernel short row segments (the bench: 64 rows x 128 fp8 values per call), so the
// conversion's instructions per weight byte bound the speed:
//  - e4m3 -> fp16 is a bit move, and F16C converts fp16 -> fp32 exactly (subnormals included). Zipping a
//    zero byte below each code gives code << 8 per 16-bit lane; an arithmetic shift right by one and
//    clearing bit 14 leave sign | 0 | eeee | mmm: the fp16 code of the value times 2^-8. The activations
//    are scaled by 2^8 instead, so each product is the exact product of the e4m3 and bf16 values.
//    The zip works within 128-bit blocks, so the fp32 lanes come out in a fixed permuted order; the
//    activation segment is arranged into that order once per call.
//  - e4m3 NaN codes (0x7F, 0xFF) have no fp16 image: a running byte maximum of code | 0x80 per row finds
//    them and makes that row's sums NaN, as the products would.
//  - bf16 weights widen in their natural order (zero-extend and shift).
//  - each block of rows prefetches its segment two calls ahead into L2, like the avx512bf16 kernel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/tl_gemv.cc"
#include "backends/cpu/tl_gemv.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <stdint.h>

#include "backends/cpu/hwy/f16_halves-inl.h"
#include "backends/cpu/scalar_convert.h"

// Only the targets levels.h maps to (the compiler's baseline, HWY_SCALAR, is compiled too but unused).
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU8 = hn::Repartition<uint8_t, DF>;
using DU16 = hn::Repartition<uint16_t, DF>;
using DI16 = hn::Repartition<int16_t, DF>;
using DF16 = hn::Repartition<hwy::float16_t, DF>;
using DF8 = hn::CappedTag<float, 8>;  // eight fp32 lanes (four on 128-bit targets)
using VF = hn::Vec<DF>;
using VU8 = hn::Vec<DU8>;

constexpr int kLanes = int(hn::MaxLanes(DF()));  // fp32 lanes of a vector
constexpr int kChunk = 4 * kLanes;               // weights per step: one vector of fp8 codes
constexpr int kSegment = 1024;                   // K values arranged per pass (4 rows: 16 KiB of fp32)
constexpr int kMaxRows = 4;

// Position in the chunk of the first of eight consecutive weights that land in fp32 lanes
// [8 * group, 8 * group + 8) of converted vector q (see e4m3_to_f32): ZipLower / ZipUpper take bytes
// 0-7 / 8-15 of each 16-byte block, LowerHalf / UpperHalf the first / second half of the blocks.
// On 128-bit targets (NEON) the groups are four lanes and the widening keeps the weights in natural order.
constexpr int kGroup = int(hn::MaxLanes(DF8()));  // fp32 lanes of a group: 8, or 4 on 128-bit targets
constexpr int fp8_group_start(int q, int group) {
#if HWY_TARGET == HWY_NEON
  return q * kLanes + kGroup * group;
#else
  return 16 * ((q & 1) * (kLanes / 8) + group) + 8 * (q >> 1);
#endif
}

// The activation segment [k0, k0 + len) of each row as fp32 in the weights' lane order, zero-padded to
// whole chunks, rows a_stride floats apart; scaled by 2^8 for fp8 weights.
void arrange_activations(const TlGemvArgs& g, int64_t k0, int len, bool fp8, float* dst, int64_t a_stride) {
  const DF8 d8;
  const hn::Rebind<uint16_t, DF8> du16;
  const hn::Rebind<uint32_t, DF8> du32;
  const hn::Vec<DF8> scale = hn::Set(d8, fp8 ? 256.0f : 1.0f);
  HWY_ALIGN uint16_t tail[kChunk];
  for (int m = 0; m < g.rows; ++m) {
    const uint16_t* row = g.a + m * g.lda + k0;
    float* out = dst + m * a_stride;
    for (int c = 0; c * kChunk < len; ++c) {
      const uint16_t* src = row + c * kChunk;
      if ((c + 1) * kChunk > len) {  // the last, partial chunk: read only what exists
        for (int i = 0; i < kChunk; ++i) tail[i] = c * kChunk + i < len ? src[i] : 0;
        src = tail;
      }
      for (int q = 0; q < 4; ++q)
        for (int group = 0; group < kLanes / kGroup; ++group) {
          const int from = fp8 ? fp8_group_start(q, group) : q * kLanes + kGroup * group;
          const hn::Vec<DF8> v = hn::BitCast(d8, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, src + from))));
          hn::Store(hn::Mul(v, scale), d8, out + c * kChunk + q * kLanes + kGroup * group);
        }
    }
  }
}

// One chunk of e4m3 codes -> four fp32 vectors (values x 2^-8, lane order of fp8_group_start).
HWY_INLINE void e4m3_to_f32(const uint8_t* p, VF* f, VU8* nan_max) {
  const DU8 du8;
  const DU16 du16;
  const DI16 di16;
  const DF16 df16;
  const VU8 codes = hn::LoadU(du8, p);
  *nan_max = hn::Max(*nan_max, hn::Or(codes, hn::Set(du8, 0x80)));
  const hn::Vec<DI16> keep = hn::Set(di16, int16_t(~0x4000));
  const hn::Vec<DI16> lo = hn::BitCast(di16, hn::ZipLower(du16, hn::Zero(du8), codes));
  const hn::Vec<DI16> hi = hn::BitCast(di16, hn::ZipUpper(du16, hn::Zero(du8), codes));
  const hn::Vec<DF16> h_lo = hn::BitCast(df16, hn::And(hn::ShiftRight<1>(lo), keep));
  const hn::Vec<DF16> h_hi = hn::BitCast(df16, hn::And(hn::ShiftRight<1>(hi), keep));
  f[0] = promote_f16_half<false>(df16, h_lo);
  f[1] = promote_f16_half<true>(df16, h_lo);
  f[2] = promote_f16_half<false>(df16, h_hi);
  f[3] = promote_f16_half<true>(df16, h_hi);
}

// One chunk of bf16 weights -> four fp32 vectors in natural order.
HWY_INLINE void bf16_to_f32(const uint16_t* p, VF* f) {
  const DF df;
  const hn::Rebind<uint16_t, DF> du16;
  const hn::Rebind<uint32_t, DF> du32;
  for (int q = 0; q < 4; ++q)
    f[q] = hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p + q * kLanes))));
}

// {sum(x[0]), sum(x[1]), sum(x[2]), sum(x[3])}: pairs of lanes interleaved and added within each
// 128-bit block (two steps leave one sum of each vector per block), then the blocks added.
HWY_INLINE hn::Vec128<float> sum4(const VF* x) {
  const DF df;
  const hn::Repartition<uint64_t, DF> d64;
  const VF s01 = hn::Add(hn::InterleaveLower(df, x[0], x[1]), hn::InterleaveUpper(df, x[0], x[1]));
  const VF s23 = hn::Add(hn::InterleaveLower(df, x[2], x[3]), hn::InterleaveUpper(df, x[2], x[3]));
  const auto a = hn::BitCast(d64, s01), b = hn::BitCast(d64, s23);
  const VF s =
      hn::Add(hn::BitCast(df, hn::InterleaveLower(d64, a, b)), hn::BitCast(df, hn::InterleaveUpper(d64, a, b)));
#if HWY_TARGET == HWY_AVX3
  const hn::Vec256<float> half = hn::Add(hn::LowerHalf(s), hn::UpperHalf(hn::Full256<float>(), s));
  return hn::Add(hn::LowerHalf(half), hn::UpperHalf(hn::Full128<float>(), half));
#elif HWY_TARGET == HWY_NEON
  return s;  // one 128-bit register already holds the four sums
#else
  return hn::Add(hn::LowerHalf(s), hn::UpperHalf(hn::Full128<float>(), s));
#endif
}

struct Pass {
  const float* a;  // arranged activations, row m at a + m * a_stride
  int64_t a_stride;
  int64_t k0;        // first K value of the pass
  int len;           // K values in the pass
  int64_t prefetch;  // bytes ahead in each weight row to prefetch (0: none)
};

// Unrolled loops: the accumulator arrays below only stay in registers when every index is a constant.
#ifndef TESSERA_UNROLL
#define TESSERA_UNROLL _Pragma("GCC unroll 16")
#endif

// The products of one chunk of R weight rows (src[r] + offset bytes) with M arranged activation rows.
template <int M, int R, bool kFp8>
HWY_INLINE void chunk(const uint8_t* const* src, int64_t offset, const float* a, int64_t a_stride, VF (&acc)[M][R],
                      VU8* nan_max) {
  const DF df;
  TESSERA_UNROLL
  for (int r = 0; r < R; ++r) {
    VF f[4];
    if constexpr (kFp8) {
      e4m3_to_f32(src[r] + offset, f, nan_max);
    } else {
      bf16_to_f32(reinterpret_cast<const uint16_t*>(src[r] + offset), f);
    }
    TESSERA_UNROLL
    for (int m = 0; m < M; ++m) {
      TESSERA_UNROLL
      for (int q = 0; q < 4; ++q) acc[m][r] = hn::MulAdd(f[q], hn::Load(df, a + m * a_stride + q * kLanes), acc[m][r]);
    }
  }
}

// out[m][n0 .. n0 + R) (+)= the pass's part of the dot products of R weight rows. One accumulator per
// (activation row, weight row): the R rows' FMA chains interleave, which hides the FMA latency.
template <int M, int R, bool kFp8>
HWY_INLINE void rows_block(const TlGemvArgs& g, const Pass& p, int n0, bool accumulate) {
  const DF df;
  const DU8 du8;
  constexpr int es = kFp8 ? 1 : 2;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = static_cast<const uint8_t*>(g.w) + ((int64_t(n0) + r) * g.ldw + p.k0) * es;
  if (p.prefetch)
    for (int64_t off = 0; off < int64_t(p.len) * es; off += 64)
      for (int r = 0; r < R; ++r) __builtin_prefetch(w[r] + p.prefetch + off, 0, 2);  // prefetcht1: into L2
  VF acc[M][R];
  TESSERA_UNROLL
  for (int m = 0; m < M; ++m) TESSERA_UNROLL
  for (int r = 0; r < R; ++r) acc[m][r] = hn::Zero(df);
  VU8 nan_max = hn::Zero(du8);  // of code | 0x80 over the block's rows: 0xFF somewhere iff a NaN code
  const int whole = p.len / kChunk;
  for (int c = 0; c < whole; ++c)
    chunk<M, R, kFp8>(w, int64_t(c) * kChunk * es, p.a + c * kChunk, p.a_stride, acc, &nan_max);
  if (whole * kChunk < p.len) {  // the last, partial chunk: weights past the row's end read as zeros
    HWY_ALIGN uint8_t tail[R][kChunk * es];
    const uint8_t* t[R];
    const int valid = (p.len - whole * kChunk) * es;
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < kChunk * es; ++i) tail[r][i] = i < valid ? w[r][int64_t(whole) * kChunk * es + i] : 0;
      t[r] = tail[r];
    }
    chunk<M, R, kFp8>(t, 0, p.a + whole * kChunk, p.a_stride, acc, &nan_max);
  }
  bool nan_row[R] = {};
  if constexpr (kFp8) {
    if (HWY_UNLIKELY(!hn::AllFalse(du8, hn::Eq(nan_max, hn::Set(du8, 0xFF)))))
      for (int r = 0; r < R; ++r) nan_row[r] = scalar_convert::e4m3_codes_hold_nan(w[r], p.len);
  }
  TESSERA_UNROLL
  for (int m = 0; m < M; ++m) {
    const VF* sums = acc[m];
    float* o = g.out + m * g.ldo + n0;
    if constexpr (R == 4) {
      const hn::Full128<float> d4;
      hn::Vec128<float> s = sum4(sums);
      if (accumulate) s = hn::Add(s, hn::LoadU(d4, o));
      hn::StoreU(s, d4, o);
    } else {
      for (int r = 0; r < R; ++r) {
        const float s = hn::GetLane(hn::SumOfLanes(df, sums[r]));
        o[r] = accumulate ? o[r] + s : s;
      }
    }
    for (int r = 0; r < R; ++r)
      if (nan_row[r]) o[r] = __builtin_nanf("");
  }
}

template <int M, bool kFp8>
void run_pass(const TlGemvArgs& g, const Pass& p, bool accumulate) {
  // M x R accumulators in registers (16 on AVX2, 32 on AVX-512; four more hold a converted chunk).
  constexpr int R = M <= 2 || kLanes == 16 ? 4 : 2;
  int n = 0;
  for (; n + R <= g.n_rows; n += R) rows_block<M, R, kFp8>(g, p, n, accumulate);
  for (; n < g.n_rows; ++n) rows_block<M, 1, kFp8>(g, p, n, accumulate);
}

template <bool kFp8>
void run(const TlGemvArgs& g, const Pass& p, bool accumulate) {
  switch (g.rows) {
    case 1:
      return run_pass<1, kFp8>(g, p, accumulate);
    case 2:
      return run_pass<2, kFp8>(g, p, accumulate);
    case 3:
      return run_pass<3, kFp8>(g, p, accumulate);
    default:
      return run_pass<4, kFp8>(g, p, accumulate);
  }
}

void gemv(const TlGemvArgs& g) {
  if (g.rows <= 0 || g.rows > kMaxRows || g.n_rows <= 0) return;
  HWY_ALIGN float arranged[kMaxRows * kSegment];
  const int es = g.w_fp8 ? 1 : 2;
  const int64_t passes = g.k_len > kSegment ? (int64_t(g.k_len) + kSegment - 1) / kSegment : 1;
  for (int64_t pass = 0; pass < passes; ++pass) {
    Pass p;
    p.k0 = pass * kSegment;
    p.len = int(g.k_len - p.k0 < kSegment ? g.k_len - p.k0 : kSegment);
    p.a = arranged;
    p.a_stride = (p.len + kChunk - 1) / kChunk * kChunk;
    // Two calls ahead: the same K range of each row when rows are longer than the call's K range (a
    // row-major matrix walked K tile by K tile); the bytes two tiles further on when the call's rows are
    // one contiguous tile (weights stored tile by tile, walked tile after tile).
    const bool contiguous = g.ldw == g.k_len;
    p.prefetch = 2 * int64_t(g.k_len) * es * (contiguous ? g.n_rows : 1);
    arrange_activations(g, p.k0, p.len, g.w_fp8 != 0, arranged, p.a_stride);
    const bool accumulate = g.accumulate || pass > 0;
    if (g.w_fp8) {
      run<true>(g, p, accumulate);
    } else {
      run<false>(g, p, accumulate);
    }
  }
}

}  // namespace

TlGemvFn tl_gemv_table() {
  return gemv;
}

}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // AVX2 or AVX3

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"

namespace tessera::cpu {
TlGemvFn tl_gemv_hwy(Isa level) {
  TESSERA_HWY_SELECT(level, tl_gemv_table);
}
}  // namespace tessera::cpu
#endif
