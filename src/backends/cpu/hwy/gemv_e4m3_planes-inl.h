// Decode GEMV over e4m3 weights read as byte planes, for the avx2 and avx512 levels (gemv.cc calls it
// there).
// Each 32-bit lane of a loaded vector holds 4 codes; plane J (J = 0..3) takes byte J of every lane
// into an fp32 vector with shifts and a mask only: the code's sign goes to bit 31 and its exponent
// and mantissa to bits 20..26, which is the code's value times 2^-120 as an fp32 (subnormal codes
// become fp32 denormals with the same scaling, zeros signed zeros). On Zen 3 this costs 5 shifts per
// 32 codes where the binary16 route (vcvtph2ps, vextracti128) costs the equivalent of 16 issue slots
// on the ports the FMAs use.
//
// The activations are prepared in plane order times 2^119 (|a| <= 448 stays finite; subnormal codes
// come from a table, so none is ever a denormal), so every product is exactly a.w / 2, a normal fp32
// or zero, and the sums are doubled at the end (exact). A denormal weight plane is an input, never a
// result, so it is exact as long as MXCSR's denormals-are-zero flag is clear: the kernel clears it
// for its own duration (and restores it), so the bits do not depend on the caller's flag. e4m3's NaN
// code (S.1111.111) becomes a finite plane value; a running maximum of the codes' magnitudes per
// block of rows finds it, and the rows holding one are traced and give NaN.
#if defined(TESSERA_HWY_GEMV_E4M3_PLANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_GEMV_E4M3_PLANES_INL_H_
#undef TESSERA_HWY_GEMV_E4M3_PLANES_INL_H_
#else
#define TESSERA_HWY_GEMV_E4M3_PLANES_INL_H_
#endif

#include <hwy/highway.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemv_prefetch.h"
#include "backends/cpu/gemv_row_count.h"
#include "backends/cpu/scalar_convert.h"

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#include <xmmintrin.h>  // _mm_getcsr, _mm_setcsr

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {  // internal linkage: no weak symbol of a target namespace (scripts/check_isa_objects.sh)
namespace e4m3_planes {

using DF = hn::ScalableTag<float>;
using DU32 = hn::RebindToUnsigned<DF>;
using DI16 = hn::Repartition<int16_t, DF>;
using DI8 = hn::Repartition<int8_t, DF>;
using V = hn::Vec<DF>;
using VI8 = hn::Vec<DI8>;

constexpr int64_t kL = int64_t(hn::MaxLanes(DF()));
constexpr int64_t kPiece = 4 * kL;            // codes per vector load: 4 planes of kL lanes
constexpr int64_t kChunk = 64;                // K walked in chunks of whole pieces (2 at avx2, 1 at avx512)
constexpr float kActivationScale = 0x1p119f;  // a x 2^119 times value x 2^-120 = a.value / 2
constexpr float kUnit = 2.0f;                 // undoes the products' 1/2

// Weight rows per block and accumulator chains per row, functions of M only, so a row's bits do not
// depend on its block or thread: M = 1 splits each row's sum into two chains (the planes' four FMAs
// would otherwise wait on each other).
template <int M>
constexpr int kBlockRows = M == 1   ? 2
                           : M == 2 ? 3
                                    : 2;
// Above 4 activation rows the binary16 route's blocks (gemv.cc) are faster: one thread, 4096 x 7168
// weights, M = 5-8 took 1.22-1.30x its time here. At avx512 the binary16 route is also faster for one
// row (Zen 4, two threads from DRAM: 1.25x the planes' time at M = 1; the planes 0.9x its time at M = 2
// and 4).
constexpr int kMaxRows = 4;
constexpr int kMinRows = HWY_TARGET == HWY_AVX3 ? 2 : 1;
template <int M>
constexpr int kChains = M == 1 ? 2 : 1;

// value(code) x 2^119 for the 256 codes (NaN for e4m3's NaN); built on first use.
inline const float* scaled_activation_values() {
  struct Table {
    alignas(64) float v[256];
    Table() {
      for (int c = 0; c < 256; ++c) v[c] = scalar_convert::e4m3_to_f32_scalar(uint8_t(c)) * kActivationScale;
    }
  };
  static const Table table;
  return table.v;
}

// The 16-bit lanes of one vector of codes shifted right by 4 (arithmetic), so each lane's high byte
// lands at bits 4..11 with its sign above: kOdd takes bytes 1 and 3 of each 32-bit lane, else bytes 0
// and 2 (moved up first).
template <bool kOdd>
HWY_INLINE hn::Vec<DU32> half_bytes(VI8 x) {
  const auto lanes = hn::BitCast(DI16(), x);
  return hn::BitCast(DU32(), hn::ShiftRight<4>(kOdd ? lanes : hn::ShiftLeft<8>(lanes)));
}

// Plane J from half_bytes<J % 2>: the sign at bit 31, exponent and mantissa at bits 20..26.
template <int J>
HWY_INLINE V plane(hn::Vec<DU32> half) {
  const DU32 du32;
  return hn::BitCast(DF(), hn::And(J < 2 ? hn::ShiftLeft<16>(half) : half, hn::Set(du32, 0x87F00000u)));
}

// Activation row m -> dst + m * k_pad in plane order, times 2^119, zero from K to k_pad.
inline void prepare_activations(const GemvArgs& p, float* HWY_RESTRICT dst, int64_t k_pad) {
  const float* value = scaled_activation_values();
  for (int m = 0; m < p.m; ++m) {
    const uint8_t* row = static_cast<const uint8_t*>(p.a) + m * p.a_stride;
    float* out = dst + m * k_pad;
    for (int64_t k = 0; k < k_pad; ++k) {
      const int64_t piece = k / kPiece * kPiece, i = k - piece;  // i: byte 4 l + J -> lane l of plane J
      out[piece + (i % 4) * kL + i / 4] = k < p.k ? value[row[k]] : 0.0f;
    }
  }
}

// Plane J's products: each weight row's plane, each activation row's vector loaded once for the block.
template <int M, int NB, int kS, int J>
HWY_INLINE void plane_products(const float* HWY_RESTRICT ak, int64_t k_pad, const hn::Vec<DU32> (&half)[NB],
                               V (&acc)[M][NB][kS]) {
  const DF df;
  V wv[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) wv[j] = plane<J>(half[j]);
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m) {
    const V av = hn::LoadU(df, ak + m * k_pad + J * kL);
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) acc[m][j][J % kS] = hn::MulAdd(av, wv[j], acc[m][j][J % kS]);
  }
}

// One piece of every row of the block, planes in the order 0, 2, 1, 3 (one half_bytes per row live).
template <int M, int NB, int kS>
HWY_INLINE void piece_products(const float* HWY_RESTRICT ak, int64_t k_pad, const VI8 (&x)[NB], V (&acc)[M][NB][kS]) {
  hn::Vec<DU32> half[NB];
  for (int j = 0; j < NB; ++j) half[j] = half_bytes<false>(x[j]);
  plane_products<M, NB, kS, 0>(ak, k_pad, half, acc);
  plane_products<M, NB, kS, 2>(ak, k_pad, half, acc);
  for (int j = 0; j < NB; ++j) half[j] = half_bytes<true>(x[j]);
  plane_products<M, NB, kS, 1>(ak, k_pad, half, acc);
  plane_products<M, NB, kS, 3>(ak, k_pad, half, acc);
}

// out[m][n .. n + NB) over the whole K: per scale group, fresh accumulators, then scaled into the
// totals; chunks past the last whole one from zero-padded copies of the rows' tails.
template <int M, int NB, bool kScaled>
void row_block(const GemvArgs& p, const float* HWY_RESTRICT a, int64_t k_pad, int64_t n) {
  const DF df;
  const DI8 di8;
  constexpr int kS = kChains<M>;
  static_assert(kChunk % kPiece == 0, "a chunk is whole pieces");
  const int64_t k_whole = p.k / kChunk * kChunk;
  const uint8_t* w[NB];
  alignas(64) uint8_t tail[NB][kChunk];
  for (int j = 0; j < NB; ++j) {
    w[j] = static_cast<const uint8_t*>(p.w) + (n + j) * p.ldw;
    if (k_whole < k_pad) {
      memset(tail[j], 0, sizeof tail[j]);
      memcpy(tail[j], w[j] + k_whole, size_t(p.k - k_whole));
    }
  }
  // Software pipeline: the same K offset of the block of rows at least kGemvPrefetchBytes on is fetched
  // while this block is read.
  const int64_t block_bytes = NB * p.k;
  const int64_t ahead = (kGemvPrefetchBytes + block_bytes - 1) / block_bytes * NB;
  const int64_t next = n + ahead + NB <= p.n1 ? ahead * p.ldw : 0;
  const int64_t group = kScaled ? p.group : k_pad;
  int64_t w_scale_row[NB];
  for (int j = 0; j < NB; ++j) w_scale_row[j] = kScaled ? (p.w_row0 + n + j) / p.w_scale_rows : 0;

  V tot[M][NB];
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NB; ++j) tot[m][j] = hn::Zero(df);
  auto magnitudes = hn::Zero(di8);  // the largest |code| of the block's rows; 0x7F is NaN
  for (int64_t kb = 0, g = 0; kb < k_pad; kb += group, ++g) {
    const int64_t ke = kb + group < k_pad ? kb + group : k_pad;
    V acc[M][NB][kS];
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j)
        for (int c = 0; c < kS; ++c) acc[m][j][c] = hn::Zero(df);
    for (int64_t kc = kb; kc < ke; kc += kChunk) {
      const int8_t* src[NB];
      for (int j = 0; j < NB; ++j) {
        if (next) {
          // M >= 3 is bound by its FMAs: its lines into L1 (into L2 it was 7% slower at K = 512)
          if constexpr (M >= 3)
            prefetch_weights_l1(w[j] + next + kc);
          else
            prefetch_weights_l2(w[j] + next + kc);
        }
        src[j] = reinterpret_cast<const int8_t*>(kc < k_whole ? w[j] + kc : tail[j]);
      }
      for (int64_t q = 0; q < kChunk; q += kPiece) {
        VI8 x[NB];
        for (int j = 0; j < NB; ++j) {
          x[j] = hn::LoadU(di8, src[j] + q);
          magnitudes = hn::Max(magnitudes, hn::And(x[j], hn::Set(di8, 0x7F)));
        }
        piece_products<M, NB, kS>(a + kc + q, k_pad, x, acc);
      }
    }
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j) {
        if constexpr (kS == 2) acc[m][j][0] = hn::Add(acc[m][j][0], acc[m][j][1]);
        if constexpr (kScaled) {
          const float s = p.a_scale[g * p.a_scale_stride + m] * p.w_scale[g * p.w_scale_stride + w_scale_row[j]];
          tot[m][j] = hn::MulAdd(acc[m][j][0], hn::Set(df, s * kUnit), tot[m][j]);
        } else {
          tot[m][j] = hn::Add(tot[m][j], acc[m][j][0]);
        }
      }
  }
  const bool block_nan = !hn::AllFalse(di8, hn::Eq(magnitudes, hn::Set(di8, 0x7F)));
  for (int j = 0; j < NB; ++j) {
    const bool nan = block_nan && (NB == 1 || scalar_convert::e4m3_codes_hold_nan(w[j], p.k));
    for (int m = 0; m < M; ++m) {
      const float sum = hn::GetLane(hn::SumOfLanes(df, tot[m][j]));
      p.out[m * p.ldo + n + j] = nan ? NAN : kScaled ? sum : sum * kUnit;
    }
  }
}

template <int M, bool kScaled>
void rows(const GemvArgs& p, const float* a, int64_t k_pad) {
  constexpr int kNb = kBlockRows<M>;
  int64_t n = p.n0;
  for (; n + kNb <= p.n1; n += kNb) row_block<M, kNb, kScaled>(p, a, k_pad, n);
  for (; n < p.n1; ++n) row_block<M, 1, kScaled>(p, a, k_pad, n);
}

// Whether gemv below takes the problem: e4m3 weights (and activations), kMinRows <= M <= kMaxRows.
inline bool takes(const GemvArgs& p) {
  return p.w_type == GemmSrcType::kE4M3 && p.m >= kMinRows && p.m <= kMaxRows;
}

// The GEMV of gemv.cc for the problems it takes; a = p.scratch, k_pad a multiple of kChunk.
inline void gemv(const GemvArgs& p, float* a, int64_t k_pad) {
  constexpr unsigned kDenormalsAreZero = 0x0040;
  const unsigned csr = _mm_getcsr();
  if (csr & kDenormalsAreZero) _mm_setcsr(csr & ~kDenormalsAreZero);
  prepare_activations(p, a, k_pad);
  with_gemv_row_count(p.m, [&](auto rows_c) {
    constexpr int M = decltype(rows_c)::value;
    if constexpr (M <= kMaxRows) {
      if (p.a_scale != nullptr)
        rows<M, true>(p, a, k_pad);
      else
        rows<M, false>(p, a, k_pad);
    }
  });
  if (csr & kDenormalsAreZero) _mm_setcsr(csr);
}

}  // namespace e4m3_planes
}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

#endif  // include guard
