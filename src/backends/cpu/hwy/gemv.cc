// Decode GEMV (M <= 8 activation rows) over bf16 or e4m3 weights for the avx2 and avx512 levels, on
// fp32 FMAs (GemvArgs in gemm_kernel_set.h). Each piece of a weight row is widened to fp32 in registers
// and multiplied into every activation row; the activations are widened once per call by the same code,
// so they come out in the weights' lane order (the dot products do not depend on it).
//  - bf16 -> fp32: the 16 bits become the upper half of a 32-bit lane (zip with zero; a permuted lane
//    order within 128-bit blocks);
//  - e4m3 -> fp32 through binary16 (F16C): sign, exponent and mantissa bits move as a block into a half,
//    whose exponent bias is 8 larger, so the half holds the value x 2^-8 (subnormals included), then
//    vcvtph2ps. The weights' 2^-8 is undone by one exact factor 256 on each sum. e4m3's NaN (S.1111.111)
//    has no such counterpart: a row holding one gives NaN outputs, as the products would. At the avx2
//    level, e4m3 weights with M <= 4 (2 <= M <= 4 at avx512) take byte planes instead
//    (gemv_e4m3_planes-inl.h).
// Every weight row is one chain of accumulators per activation row, so its bits do not depend on the
// other rows of its block or on how rows were split between threads.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/gemv.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemv_prefetch.h"
#include "backends/cpu/gemv_row_count.h"
#include "backends/cpu/hwy/f16_halves-inl.h"
#include "backends/cpu/hwy/gemv_e4m3_planes-inl.h"
#include "backends/cpu/scalar_convert.h"

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_NEON
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DU8 = hn::Repartition<uint8_t, DF>;
using V = hn::Vec<DF>;
using VU8 = hn::Vec<DU8>;

constexpr int64_t kL = int64_t(hn::MaxLanes(DF()));  // fp32 lanes per vector
constexpr int64_t kChunk = 64;                       // K padding unit (GemvArgs: groups are whole chunks)

// How a weight row is cut into pieces and widened to fp32. A wide piece is one input vector: 2 (bf16)
// or 4 (e4m3) fp32 vectors in a permuted lane order (see the top of the file). A narrow e4m3 piece is
// half an input vector, sign-extended to 16-bit lanes in place, so it widens in natural lane order
// without the zip and gives 2 fp32 vectors: fewer registers per weight row, so more rows fit a block.
template <bool kFp8, bool kNarrow>
struct Piece {
  static_assert(kFp8 || !kNarrow, "narrow pieces are e4m3 only");
  static constexpr int kVecs = kFp8 && !kNarrow ? 4 : 2;
  static constexpr int64_t kValues = kVecs * kL;
  // The running maximum of the codes' magnitudes (e4m3): the largest one, S.1111.111, is e4m3's NaN.
  using Magnitudes = hn::Vec<hn::Repartition<std::conditional_t<kNarrow, uint16_t, uint8_t>, DF>>;

  static HWY_INLINE Magnitudes no_magnitudes() { return hn::Zero(hn::DFromV<Magnitudes>()); }

  // One piece at src -> kVecs fp32 vectors. e4m3: the values x 2^-8 (binary16's exponent bias is 8
  // larger than e4m3's, subnormals included).
  static HWY_INLINE void widen(const uint8_t* HWY_RESTRICT src, V* w, Magnitudes& magnitudes) {
    const DF df;
    const hn::Repartition<uint16_t, DF> du16;
    const hn::Repartition<int16_t, DF> di16;
    const hn::Repartition<hwy::float16_t, DF> df16;
    const auto clear = hn::Set(di16, int16_t(~0x4000));
    if constexpr (kNarrow) {
      // The code sign-extended to 16 bits, shifted left by 7: exponent and mantissa land where a half
      // has them, the sign in bit 15 and (cleared) bit 14.
      const hn::Rebind<int8_t, decltype(di16)> di8;
      const auto bits =
          hn::And(hn::ShiftLeft<7>(hn::PromoteTo(di16, hn::LoadU(di8, reinterpret_cast<const int8_t*>(src)))), clear);
      magnitudes = hn::Max(magnitudes, hn::BitCast(du16, hn::Add(bits, bits)));  // the sign shifted out
      w[0] = promote_f16_half<false>(df16, hn::BitCast(df16, bits));
      w[1] = promote_f16_half<true>(df16, hn::BitCast(df16, bits));
    } else if constexpr (kFp8) {
      const DU8 du8;
      const VU8 x = hn::LoadU(du8, src);
      magnitudes = hn::Max(magnitudes, hn::And(x, hn::Set(du8, 0x7F)));
      // The code in the upper byte of a 16-bit lane; an arithmetic shift by one puts the exponent and
      // mantissa where a half has them and copies the sign into the half's top exponent bit, cleared.
      const auto lo =
          hn::BitCast(df16, hn::And(hn::ShiftRight<1>(hn::BitCast(di16, hn::ZipLower(du16, hn::Zero(du8), x))), clear));
      const auto hi =
          hn::BitCast(df16, hn::And(hn::ShiftRight<1>(hn::BitCast(di16, hn::ZipUpper(du16, hn::Zero(du8), x))), clear));
      w[0] = promote_f16_half<false>(df16, lo);
      w[1] = promote_f16_half<true>(df16, lo);
      w[2] = promote_f16_half<false>(df16, hi);
      w[3] = promote_f16_half<true>(df16, hi);
    } else {
      const hn::Repartition<uint32_t, DF> du32;
      const auto x = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(src));
      w[0] = hn::BitCast(df, hn::ZipLower(du32, hn::Zero(du16), x));
      w[1] = hn::BitCast(df, hn::ZipUpper(du32, hn::Zero(du16), x));
    }
  }

  // Whether `magnitudes` saw an e4m3 NaN code.
  static HWY_INLINE bool saw_nan(Magnitudes magnitudes) {
    const hn::DFromV<Magnitudes> d;
    const auto nan = hn::Set(d, kNarrow ? 0x7F00 : 0x7F);  // S.1111.111 as widen leaves it
    return !hn::AllFalse(d, hn::Eq(magnitudes, nan));
  }
};

// The activation rows widened into dst (row m at dst + m * k_pad, zero from K to k_pad), exact fp32
// values in the weights' lane order; an e4m3 row holding a NaN becomes all NaN (every product with it
// would be NaN).
template <bool kFp8, bool kNarrow>
void prepare_activations(const GemvArgs& p, float* HWY_RESTRICT dst, int64_t k_pad) {
  using P = Piece<kFp8, kNarrow>;
  const DF df;
  constexpr int es = kFp8 ? 1 : 2;
  const V unit = hn::Set(df, kFp8 ? 256.0f : 1.0f);
  for (int m = 0; m < p.m; ++m) {
    const uint8_t* row = static_cast<const uint8_t*>(p.a) + m * p.a_stride * es;
    float* out = dst + m * k_pad;
    auto magnitudes = P::no_magnitudes();
    for (int64_t k = 0; k < k_pad; k += P::kValues) {
      alignas(64) uint8_t tail[P::kValues * es];
      const uint8_t* src = row + k * es;
      if (k + P::kValues > p.k) {
        memset(tail, 0, sizeof tail);
        if (k < p.k) memcpy(tail, src, size_t((p.k - k) * es));
        src = tail;
      }
      V w[P::kVecs];
      P::widen(src, w, magnitudes);
      for (int v = 0; v < P::kVecs; ++v) hn::StoreU(hn::Mul(w[v], unit), df, out + k + v * kL);
    }
    if (kFp8 && P::saw_nan(magnitudes))
      for (int64_t k = 0; k < k_pad; ++k) out[k] = NAN;
  }
}

// M >= 2 on 256- and 512-bit vectors: pieces of 2 fp32 vectors, every row of a block widened first and
// each activation vector then loaded once for all of them (the widened activations come from L2: 8-16
// bytes per weight byte at M = 4), with one accumulator chain per activation row and weight row
// (single rows too, so every row sums in one order).
template <int M>
constexpr bool kRowsFirst = (kL == 8 || kL == 16) && M >= 2;

// e4m3 rows taken rows-first come in narrow pieces: 2 fp32 vectors per piece, as bf16's wide ones.
template <int M, bool kFp8>
constexpr bool kNarrowRows = kFp8&& kRowsFirst<M>;

// Weight rows per rows-first block: as many as the accumulators (M per row) and widened pieces (2 per
// row) leave registers for; AVX2 has 16 (M = 4: 12 chains + 6 pieces, a few spilled), AVX-512 32.
template <int M>
constexpr int kRowsFirstBlock = kL == 16 ? (M <= 4   ? 4
                                            : M <= 6 ? 3
                                                     : 2)
                                         : (M == 2   ? 4
                                            : M <= 4 ? 3
                                                     : 2);

// out[m][n .. n + NB) over the whole K: per scale group, fresh accumulators (one chain per activation
// row and weight row), then scaled into the totals. K is walked in chunks of kChunk values; a chunk
// past the last whole one comes from zero-padded copies of the rows' tails.
template <int M, int NB, bool kFp8, bool kNarrow, bool kScaled>
void row_block(const GemvArgs& p, const float* HWY_RESTRICT a, int64_t k_pad, int64_t n) {
  using P = Piece<kFp8, kNarrow>;
  const DF df;
  constexpr int es = kFp8 ? 1 : 2;
  constexpr int kVecs = P::kVecs;
  constexpr int64_t kPiece = P::kValues;
  static_assert(kChunk % kPiece == 0, "a chunk is whole pieces");
  const int64_t k_whole = p.k / kChunk * kChunk;
  const uint8_t* w[NB];
  alignas(64) uint8_t tail[NB][kChunk * es];
  for (int j = 0; j < NB; ++j) {
    w[j] = static_cast<const uint8_t*>(p.w) + (n + j) * p.ldw * es;
    if (k_whole < k_pad) {
      memset(tail[j], 0, sizeof tail[j]);
      memcpy(tail[j], w[j] + k_whole * es, size_t((p.k - k_whole) * es));
    }
  }
  // Software pipeline: the same K offset of the block of rows at least kGemvPrefetchBytes on is fetched
  // while this block is read (rows of a few KiB are too short for the hardware prefetcher to ramp up).
  const int64_t block_bytes = NB * p.k * es;
  const int64_t ahead = (kGemvPrefetchBytes + block_bytes - 1) / block_bytes * NB;
  const int64_t next = n + ahead + NB <= p.n1 ? ahead * p.ldw * es : 0;
  const float unit = kFp8 ? 256.0f : 1.0f;  // undoes the weights' 2^-8
  const int64_t group = kScaled ? p.group : k_pad;
  int64_t w_scale_row[NB];
  for (int j = 0; j < NB; ++j) w_scale_row[j] = kScaled ? (p.w_row0 + n + j) / p.w_scale_rows : 0;

  // Accumulator chains per (activation row, weight row): a piece's 2-4 products in one chain wait on
  // each other (4 cycles each), which bounded M = 4 over e4m3 at ~2 bytes per cycle with one weight
  // row per block; two chains (even and odd vectors) where the registers allow.
  constexpr int kSplit = (NB == 1 ? M <= 5 && !kRowsFirst<M> : M * NB <= 4 && NB <= 2) ? 2 : 1;
  V tot[M][NB];
  for (int j = 0; j < NB; ++j)
    for (int m = 0; m < M; ++m) tot[m][j] = hn::Zero(df);
  // One running maximum for the whole block (registers are short); a NaN seen there is traced to its
  // rows afterwards.
  auto magnitudes = P::no_magnitudes();
  for (int64_t kb = 0, g = 0; kb < k_pad; kb += group, ++g) {
    const int64_t ke = kb + group < k_pad ? kb + group : k_pad;
    V acc[M][NB][kSplit];
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j)
        for (int c = 0; c < kSplit; ++c) acc[m][j][c] = hn::Zero(df);
    for (int64_t kc = kb; kc < ke; kc += kChunk) {
      const uint8_t* src[NB];
      for (int j = 0; j < NB; ++j) {
        if (next) prefetch_weights_l2(w[j] + next + kc * es);
        if (es == 2 && next) prefetch_weights_l2(w[j] + next + kc * es + 64);
        src[j] = kc < k_whole ? w[j] + kc * es : tail[j];
      }
      for (int64_t kp = 0; kp < kChunk; kp += kPiece) {
        const float* ak = a + kc + kp;
        if constexpr (kRowsFirst<M>) {
          V wv[NB][kVecs];
#pragma GCC unroll 4
          for (int j = 0; j < NB; ++j) P::widen(src[j] + kp * es, wv[j], magnitudes);
#pragma GCC unroll 8
          for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
            for (int v = 0; v < kVecs; ++v) {
              const V av = hn::LoadU(df, ak + m * k_pad + v * kL);
#pragma GCC unroll 4
              for (int j = 0; j < NB; ++j) acc[m][j][0] = hn::MulAdd(av, wv[j][v], acc[m][j][0]);
            }
        } else {
#pragma GCC unroll 4
          for (int j = 0; j < NB; ++j) {
            V wv[kVecs];
            P::widen(src[j] + kp * es, wv, magnitudes);
#pragma GCC unroll 8
            for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
              for (int v = 0; v < kVecs; ++v)
                acc[m][j][v % kSplit] =
                    hn::MulAdd(hn::LoadU(df, ak + m * k_pad + v * kL), wv[v], acc[m][j][v % kSplit]);
          }
        }
      }
    }
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j) {
        if constexpr (kSplit == 2) acc[m][j][0] = hn::Add(acc[m][j][0], acc[m][j][1]);
        if constexpr (kScaled) {
          const float s = p.a_scale[g * p.a_scale_stride + m] * p.w_scale[g * p.w_scale_stride + w_scale_row[j]];
          tot[m][j] = hn::MulAdd(acc[m][j][0], hn::Set(df, s * unit), tot[m][j]);
        } else {
          tot[m][j] = hn::Add(tot[m][j], acc[m][j][0]);
        }
      }
  }
  const bool block_nan = kFp8 && P::saw_nan(magnitudes);
  for (int j = 0; j < NB; ++j) {
    const bool nan = block_nan && (NB == 1 || scalar_convert::e4m3_codes_hold_nan(w[j], p.k));
    for (int m = 0; m < M; ++m) {
      const float sum = hn::GetLane(hn::SumOfLanes(df, tot[m][j]));
      p.out[m * p.ldo + n + j] = nan ? NAN : kScaled ? sum : sum * unit;
    }
  }
}

template <int M, bool kFp8, bool kScaled>
void rows(const GemvArgs& p, const float* a, int64_t k_pad) {
  constexpr bool kNarrow = kNarrowRows<M, kFp8>;
  // Weight rows per block: independent streams and chains, as many as the registers hold (M = 1 and
  // NEON's 128-bit vectors take wide pieces row by row).
  constexpr int kNb = kRowsFirst<M> ? kRowsFirstBlock<M> : M == 1 ? 4 : M == 2 ? 2 : 1;
  int64_t n = p.n0;
  for (; n + kNb <= p.n1; n += kNb) row_block<M, kNb, kFp8, kNarrow, kScaled>(p, a, k_pad, n);
  for (; n < p.n1; ++n) row_block<M, 1, kFp8, kNarrow, kScaled>(p, a, k_pad, n);
}

template <bool kFp8, bool kScaled>
void dispatch(const GemvArgs& p, const float* a, int64_t k_pad) {
  with_gemv_row_count(p.m, [&](auto rows_c) { rows<decltype(rows_c)::value, kFp8, kScaled>(p, a, k_pad); });
}

// Whether the call's row count takes narrow pieces (the activations must be widened the same way).
template <bool kFp8>
bool narrow_rows(int m) {
  return with_gemv_row_count(m, [](auto rows_c) { return kNarrowRows<decltype(rows_c)::value, kFp8>; });
}

template <bool kFp8>
void gemv_typed(const GemvArgs& p, float* a, int64_t k_pad) {
  if (narrow_rows<kFp8>(p.m)) {
    if constexpr (kFp8) prepare_activations<true, true>(p, a, k_pad);
  } else {
    prepare_activations<kFp8, false>(p, a, k_pad);
  }
  if (p.a_scale != nullptr)
    dispatch<kFp8, true>(p, a, k_pad);
  else
    dispatch<kFp8, false>(p, a, k_pad);
}

void gemv(const GemvArgs& p) {
  const int64_t k_pad = (p.k + kChunk - 1) / kChunk * kChunk;
  float* a = static_cast<float*>(p.scratch);
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  // e4m3 weights at small M as byte planes there (gemv_e4m3_planes-inl.h): the binary16 route below
  // costs about 3 times the issue slots of the planes' shifts on the ports the FMAs use (Zen 3:
  // vcvtph2ps and vextracti128 one per cycle).
  if (e4m3_planes::takes(p)) return e4m3_planes::gemv(p, a, k_pad);
#endif
  if (p.w_type == GemmSrcType::kE4M3)
    gemv_typed<true>(p, a, k_pad);
  else
    gemv_typed<false>(p, a, k_pad);
}

}  // namespace

GemvFn gemv_fn() {
  return gemv;
}
#endif
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/hwy/levels.h"

namespace tessera::cpu {
GemvFn gemv_kernel_hwy(Isa level) {
  TESSERA_HWY_SELECT(level, gemv_fn);
}
}  // namespace tessera::cpu
#endif
