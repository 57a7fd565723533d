// Decode GEMV (M <= 8 activation rows) over bf16 or e4m3 weights at the neon_bf16 level, on BFDOT
// (GemvArgs in gemm_kernel_set.h). A "piece" is 16 K values of a weight row: two bf16 q registers,
// loaded as they are or converted from 16 e4m3 bytes (below), each multiplied into every activation
// row with BFDOT (4 fp32 lanes, each the sum of two adjacent products). The activations are made bf16
// once per call, into the scratch buffer.
//  - e4m3 -> bf16, exact (every e4m3 value, subnormals and NaN included, is a bf16 value), on the
//    bytes of 16 codes at once: the high and low bytes of the bf16 bits from the exponent-rebias
//    formula, two 16-entry lookups for the subnormals and first binade, a select for NaN, the sign,
//    two zips (e4m3x16_to_bf16: 13 vector instructions per 16 weights, 2 table registers).
//  - Every weight row keeps its own accumulator chains per activation row (two per row for M <= 4,
//    splitting the even and odd vectors of a piece), fixed by M alone: its bits do not depend on the
//    other rows of its block or on how rows were split between threads.
// BFDOT's sums (without FEAT_EBF16's FPCR.EBF) round to odd and flush denormals to zero, like
// BFMMLA's (gemm_ukr_bfmmla.cc).
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemv_row_count.h"
#include "backends/cpu/neon/f32_vec.h"
#include "backends/cpu/neon_bf16/e4m3_bf16.h"

namespace tessera::cpu {
namespace {

constexpr int64_t kChunk = 64;  // K padding unit (GemvArgs: groups are whole chunks)
constexpr int64_t kPiece = 16;  // K values per piece
constexpr int64_t kPrefetchBytes = 8192;

template <bool kFp8>
inline void load_piece(const Tables& t, const uint8_t* src, bfloat16x8_t w[2]) {
  if constexpr (kFp8) {
    e4m3x16_to_bf16(t, vld1q_u8(src), &w[0], &w[1]);
  } else {
    w[0] = vreinterpretq_bf16_u8(vld1q_u8(src));
    w[1] = vreinterpretq_bf16_u8(vld1q_u8(src + 16));
  }
}

// The activation rows as bf16 in dst (row m at dst + m * k_pad, zero from K to k_pad).
template <bool kFp8>
void prepare_activations(const GemvArgs& p, uint16_t* dst, int64_t k_pad) {
  const uint16_t* bits = kFp8 ? code_bits().bits : nullptr;
  for (int m = 0; m < p.m; ++m) {
    uint16_t* out = dst + m * k_pad;
    if constexpr (kFp8) {
      const uint8_t* row = static_cast<const uint8_t*>(p.a) + m * p.a_stride;
      for (int64_t k = 0; k < p.k; ++k) out[k] = bits[row[k]];
    } else {
      memcpy(out, static_cast<const uint16_t*>(p.a) + m * p.a_stride, size_t(p.k) * 2);
    }
    memset(out + p.k, 0, size_t(k_pad - p.k) * 2);
  }
}

// Accumulator chains per (activation row, weight row): fixed by M, never by the block's size.
template <int M>
constexpr int kSplit = M <= 4 ? 2 : 1;

// out[m][n .. n + NB) over the whole K: per scale group, fresh accumulators, then scaled into totals.
template <int M, int NB, bool kFp8, bool kScaled>
void row_block(const GemvArgs& p, const Tables& t, const uint16_t* a, int64_t k_pad, int64_t n) {
  constexpr int es = kFp8 ? 1 : 2;
  constexpr int S = kSplit<M>;
  // Pieces from k_full on would read past K: they come from zero-padded copies of the rows' tails.
  const int64_t k_full = p.k / kPiece * kPiece;
  const uint8_t* w[NB];
  alignas(16) uint8_t tail[NB][kChunk * es];
  for (int j = 0; j < NB; ++j) {
    w[j] = static_cast<const uint8_t*>(p.w) + (n + j) * p.ldw * es;
    if (k_full < k_pad) {
      memset(tail[j], 0, sizeof tail[j]);
      memcpy(tail[j], w[j] + k_full * es, size_t((p.k - k_full) * es));
    }
  }
  // The same K offset of the block of rows at least kPrefetchBytes on is fetched while this block is
  // read (rows of a few KiB are too short for the hardware prefetcher to ramp up).
  const int64_t block_bytes = NB * p.k * es;
  const int64_t ahead = (kPrefetchBytes + block_bytes - 1) / block_bytes * NB;
  const int64_t next = n + ahead + NB <= p.n1 ? ahead * p.ldw * es : 0;
  const int64_t group = kScaled ? p.group : k_pad;
  int64_t w_scale_row[NB];
  for (int j = 0; j < NB; ++j) w_scale_row[j] = kScaled ? (p.w_row0 + n + j) / p.w_scale_rows : 0;

  float32x4_t tot[M][NB];
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NB; ++j) tot[m][j] = vdupq_n_f32(0.0f);
  for (int64_t kb = 0, g = 0; kb < k_pad; kb += group, ++g) {
    const int64_t ke = kb + group < k_pad ? kb + group : k_pad;
    float32x4_t acc[M][NB][S];
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j)
        for (int c = 0; c < S; ++c) acc[m][j][c] = vdupq_n_f32(0.0f);
    for (int64_t k = kb; k < ke; k += kPiece) {
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        if (next && ((k * es) & 63) == 0) __builtin_prefetch(w[j] + next + k * es, 0, 3);
        bfloat16x8_t wv[2];
        load_piece<kFp8>(t, k < k_full ? w[j] + k * es : tail[j] + (k - k_full) * es, wv);
#pragma GCC unroll 8
        for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
          for (int v = 0; v < 2; ++v) {
            const bfloat16x8_t av = vreinterpretq_bf16_u16(vld1q_u16(a + m * k_pad + k + 8 * v));
            acc[m][j][v % S] = vbfdotq_f32(acc[m][j][v % S], av, wv[v]);
          }
      }
    }
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j) {
        if constexpr (S == 2) acc[m][j][0] = vaddq_f32(acc[m][j][0], acc[m][j][1]);
        if constexpr (kScaled) {
          const float s = p.a_scale[g * p.a_scale_stride + m] * p.w_scale[g * p.w_scale_stride + w_scale_row[j]];
          tot[m][j] = vfmaq_n_f32(tot[m][j], acc[m][j][0], s);
        } else {
          tot[m][j] = vaddq_f32(tot[m][j], acc[m][j][0]);
        }
      }
  }
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NB; ++j) {
      p.out[m * p.ldo + n + j] = NeonF32::reduce_add(tot[m][j]);  // lanes summed in order 0..3
    }
}

template <int M, bool kFp8, bool kScaled>
void rows(const GemvArgs& p, const uint16_t* a, int64_t k_pad) {
  // Weight rows per block: independent streams sharing each activation load, as many as 32 registers
  // hold: accumulators M * NB * split, 2 * NB weight vectors, for e4m3 also 2 tables, 5 constants and
  // ~4 temporaries (M = 2: 16 + 8 + 11).
  constexpr int kNb = kFp8 ? (M <= 2 ? 2 : 1) : M <= 2 ? 4 : M <= 4 ? 2 : 1;
  const Tables t = kFp8 ? load_tables() : Tables{};
  int64_t n = p.n0;
  for (; n + kNb <= p.n1; n += kNb) row_block<M, kNb, kFp8, kScaled>(p, t, a, k_pad, n);
  for (; n < p.n1; ++n) row_block<M, 1, kFp8, kScaled>(p, t, a, k_pad, n);
}

template <bool kFp8, bool kScaled>
void dispatch(const GemvArgs& p, const uint16_t* a, int64_t k_pad) {
  with_gemv_row_count(p.m, [&](auto rows_c) { rows<decltype(rows_c)::value, kFp8, kScaled>(p, a, k_pad); });
}

void gemv(const GemvArgs& p) {
  if (p.n1 <= p.n0 || p.m <= 0) return;
  const int64_t k_pad = (p.k + kChunk - 1) / kChunk * kChunk;
  uint16_t* a = static_cast<uint16_t*>(p.scratch);  // 8 * k_pad * 2 bytes of the 8 * k_pad * 4 given
  const bool fp8 = p.w_type == GemmSrcType::kE4M3;
  if (fp8) {
    prepare_activations<true>(p, a, k_pad);
    return p.a_scale ? dispatch<true, true>(p, a, k_pad) : dispatch<true, false>(p, a, k_pad);
  }
  prepare_activations<false>(p, a, k_pad);
  p.a_scale ? dispatch<false, true>(p, a, k_pad) : dispatch<false, false>(p, a, k_pad);
}

}  // namespace

GemvFn gemv_kernel_neon_bf16() {
  return gemv;
}

}  // namespace tessera::cpu
