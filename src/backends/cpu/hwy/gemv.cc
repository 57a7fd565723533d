// Decode GEMV (M <= 8 activation rows) over bf16 or e4m3 weights for the avx2 and avx512 levels, on
// fp32 FMAs (GemvArgs in gemm_kernel_set.h). Each input vector of a weight row (a "piece") is widened to
// fp32 in registers and multiplied into every activation row. The widening interleaves within 128-bit
// blocks, so the lanes come out in a fixed permuted order; the activations are widened once per call by
// the same code, which puts them in the same order (the dot products do not depend on it).
//  - bf16 -> fp32: the 16 bits become the upper half of a 32-bit lane (zip with zero);
//  - e4m3 -> fp32 through binary16 (F16C): sign, exponent and mantissa bits move as a block into a half,
//    whose exponent bias is 8 larger, so the half holds the value x 2^-8 (subnormals included), then
//    vcvtph2ps. The weights' 2^-8 is undone by one exact factor 256 on each sum. e4m3's NaN (S.1111.111)
//    has no such counterpart: a row holding one gives NaN outputs, as the products would.
// Every weight row is one chain of accumulators per activation row, so its bits do not depend on the
// other rows of its block or on how rows were split between threads.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/hwy/gemv.cc"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemv_row_count.h"
#include "backends/cpu/hwy/f16_halves-inl.h"

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
constexpr int64_t kPrefetchBytes = 8192;

// fp32 vectors one input vector widens to, and the K values it holds.
template <bool kFp8>
constexpr int kPieceVecs = kFp8 ? 4 : 2;
template <bool kFp8>
constexpr int64_t kPieceValues = kPieceVecs<kFp8>* kL;

// One input vector at src -> kPieceVecs fp32 vectors (weights' lane order). e4m3: values x 2^-8, and
// `magnitudes` keeps the running byte-wise maximum of |code| (0x7F there: a NaN was read).
template <bool kFp8>
HWY_INLINE void widen_piece(const uint8_t* HWY_RESTRICT src, V* w, VU8& magnitudes) {
  const DF df;
  if constexpr (kFp8) {
    const DU8 du8;
    const hn::Repartition<uint16_t, DF> du16;
    const hn::Repartition<int16_t, DF> di16;
    const hn::Repartition<hwy::float16_t, DF> df16;
    const VU8 x = hn::LoadU(du8, src);
    magnitudes = hn::Max(magnitudes, hn::And(x, hn::Set(du8, 0x7F)));
    // The code in the upper byte of a 16-bit lane; an arithmetic shift by one puts the exponent and
    // mantissa where a half has them and copies the sign into the half's top exponent bit, cleared.
    const auto clear = hn::Set(di16, int16_t(~0x4000));
    const auto lo =
        hn::BitCast(df16, hn::And(hn::ShiftRight<1>(hn::BitCast(di16, hn::ZipLower(du16, hn::Zero(du8), x))), clear));
    const auto hi =
        hn::BitCast(df16, hn::And(hn::ShiftRight<1>(hn::BitCast(di16, hn::ZipUpper(du16, hn::Zero(du8), x))), clear));
    w[0] = promote_f16_half<false>(df16, lo);
    w[1] = promote_f16_half<true>(df16, lo);
    w[2] = promote_f16_half<false>(df16, hi);
    w[3] = promote_f16_half<true>(df16, hi);
  } else {
    const hn::Repartition<uint16_t, DF> du16;
    const hn::Repartition<uint32_t, DF> du32;
    const auto x = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(src));
    w[0] = hn::BitCast(df, hn::ZipLower(du32, hn::Zero(du16), x));
    w[1] = hn::BitCast(df, hn::ZipUpper(du32, hn::Zero(du16), x));
  }
}

// Whether `magnitudes` saw an e4m3 NaN code.
HWY_INLINE bool saw_nan(VU8 magnitudes) {
  const DU8 du8;
  return !hn::AllFalse(du8, hn::Eq(magnitudes, hn::Set(du8, 0x7F)));
}

// The activation rows widened into dst (row m at dst + m * k_pad, zero from K to k_pad), exact fp32
// values in the weights' lane order; an e4m3 row holding a NaN becomes all NaN (every product with it
// would be NaN).
template <bool kFp8>
void prepare_activations(const GemvArgs& p, float* HWY_RESTRICT dst, int64_t k_pad) {
  const DF df;
  constexpr int es = kFp8 ? 1 : 2;
  constexpr int64_t kPiece = kPieceValues<kFp8>;
  const V unit = hn::Set(df, kFp8 ? 256.0f : 1.0f);
  for (int m = 0; m < p.m; ++m) {
    const uint8_t* row = static_cast<const uint8_t*>(p.a) + m * p.a_stride * es;
    float* out = dst + m * k_pad;
    VU8 magnitudes = hn::Zero(DU8());
    for (int64_t k = 0; k < k_pad; k += kPiece) {
      alignas(64) uint8_t tail[kPiece * es];
      const uint8_t* src = row + k * es;
      if (k + kPiece > p.k) {
        memset(tail, 0, sizeof tail);
        if (k < p.k) memcpy(tail, src, size_t((p.k - k) * es));
        src = tail;
      }
      V w[kPieceVecs<kFp8>];
      widen_piece<kFp8>(src, w, magnitudes);
      for (int v = 0; v < kPieceVecs<kFp8>; ++v) hn::StoreU(hn::Mul(w[v], unit), df, out + k + v * kL);
    }
    if (kFp8 && saw_nan(magnitudes))
      for (int64_t k = 0; k < k_pad; ++k) out[k] = NAN;
  }
}

// bf16 weights at M = 3 or 4 on 256-bit vectors: two weight rows per block, each with one accumulator
// chain per activation row (single rows too, so every row sums in one order), so two rows share each
// activation load. e4m3 rows also need their widening registers and spill that way (lab note
// docs/notes/2026-12-05-x86-decode-and-combine.md).
template <int M, bool kFp8>
constexpr bool kPairedBf16Rows = kL == 8 && !kFp8 && (M == 3 || M == 4);

// out[m][n .. n + NB) over the whole K: per scale group, fresh accumulators (one chain per activation
// row and weight row), then scaled into the totals.
template <int M, int NB, bool kFp8, bool kScaled>
void row_block(const GemvArgs& p, const float* HWY_RESTRICT a, int64_t k_pad, int64_t n) {
  const DF df;
  constexpr int es = kFp8 ? 1 : 2;
  constexpr int kVecs = kPieceVecs<kFp8>;
  constexpr int64_t kPiece = kPieceValues<kFp8>;
  // Pieces from k_full on would read past K: they come from zero-padded copies of the rows' tails.
  const int64_t k_full = p.k / kPiece * kPiece;
  const uint8_t* w[NB];
  alignas(64) uint8_t tail[NB][kChunk * es];
  for (int j = 0; j < NB; ++j) {
    w[j] = static_cast<const uint8_t*>(p.w) + (n + j) * p.ldw * es;
    if (k_full < k_pad) {
      memset(tail[j], 0, sizeof tail[j]);
      memcpy(tail[j], w[j] + k_full * es, size_t((p.k - k_full) * es));
    }
  }
  // Software pipeline: the same K offset of the block of rows at least kPrefetchBytes on is fetched
  // while this block is read (rows of a few KiB are too short for the hardware prefetcher to ramp up).
  const int64_t block_bytes = NB * p.k * es;
  const int64_t ahead = (kPrefetchBytes + block_bytes - 1) / block_bytes * NB;
  const int64_t next = n + ahead + NB <= p.n1 ? ahead * p.ldw * es : 0;
  const float unit = kFp8 ? 256.0f : 1.0f;  // undoes the weights' 2^-8
  const int64_t group = kScaled ? p.group : k_pad;
  int64_t w_scale_row[NB];
  for (int j = 0; j < NB; ++j) w_scale_row[j] = kScaled ? (p.w_row0 + n + j) / p.w_scale_rows : 0;

  // Accumulator chains per (activation row, weight row): a piece's 2-4 products in one chain wait on
  // each other (4 cycles each), which bounded M = 4 over e4m3 at ~2 bytes per cycle with one weight
  // row per block; two chains (even and odd vectors) where the registers allow.
  constexpr int kSplit = (NB == 1 ? M <= 5 && !kPairedBf16Rows<M, kFp8> : M * NB <= 4 && NB <= 2) ? 2 : 1;
  V tot[M][NB];
  VU8 magnitudes[NB];
  for (int j = 0; j < NB; ++j) {
    magnitudes[j] = hn::Zero(DU8());
    for (int m = 0; m < M; ++m) tot[m][j] = hn::Zero(df);
  }
  for (int64_t kb = 0, g = 0; kb < k_pad; kb += group, ++g) {
    const int64_t ke = kb + group < k_pad ? kb + group : k_pad;
    V acc[M][NB][kSplit];
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j)
        for (int c = 0; c < kSplit; ++c) acc[m][j][c] = hn::Zero(df);
    for (int64_t k = kb; k < ke; k += kPiece) {
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        if (next && ((k * es) & 63) == 0) hwy::Prefetch(w[j] + next + k * es);
        V wv[kVecs];
        widen_piece<kFp8>(k < k_full ? w[j] + k * es : tail[j] + (k - k_full) * es, wv, magnitudes[j]);
#pragma GCC unroll 8
        for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
          for (int v = 0; v < kVecs; ++v)
            acc[m][j][v % kSplit] = hn::MulAdd(hn::LoadU(df, a + m * k_pad + k + v * kL), wv[v], acc[m][j][v % kSplit]);
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
  for (int j = 0; j < NB; ++j) {
    const bool nan = kFp8 && saw_nan(magnitudes[j]);
    for (int m = 0; m < M; ++m) {
      const float sum = hn::GetLane(hn::SumOfLanes(df, tot[m][j]));
      p.out[m * p.ldo + n + j] = nan ? NAN : kScaled ? sum : sum * unit;
    }
  }
}

template <int M, bool kFp8, bool kScaled>
void rows(const GemvArgs& p, const float* a, int64_t k_pad) {
  // Weight rows per block: independent streams and chains, as many as the registers hold without
  // spilling accumulators (AVX2 has 16: M=4 with two e4m3 rows spilled them and ran at half the speed).
  constexpr int kNb = M == 1 ? 4 : M == 2 || (M <= 4 && kL == 16) || kPairedBf16Rows<M, kFp8> ? 2 : 1;
  int64_t n = p.n0;
  for (; n + kNb <= p.n1; n += kNb) row_block<M, kNb, kFp8, kScaled>(p, a, k_pad, n);
  for (; n < p.n1; ++n) row_block<M, 1, kFp8, kScaled>(p, a, k_pad, n);
}

template <bool kFp8, bool kScaled>
void dispatch(const GemvArgs& p, const float* a, int64_t k_pad) {
  with_gemv_row_count(p.m, [&](auto rows_c) { rows<decltype(rows_c)::value, kFp8, kScaled>(p, a, k_pad); });
}

void gemv(const GemvArgs& p) {
  const int64_t k_pad = (p.k + kChunk - 1) / kChunk * kChunk;
  float* a = static_cast<float*>(p.scratch);
  const bool scaled = p.a_scale != nullptr;
  if (p.w_type == GemmSrcType::kE4M3) {
    prepare_activations<true>(p, a, k_pad);
    if (scaled)
      dispatch<true, true>(p, a, k_pad);
    else
      dispatch<true, false>(p, a, k_pad);
  } else {
    prepare_activations<false>(p, a, k_pad);
    if (scaled)
      dispatch<false, true>(p, a, k_pad);
    else
      dispatch<false, false>(p, a, k_pad);
  }
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
