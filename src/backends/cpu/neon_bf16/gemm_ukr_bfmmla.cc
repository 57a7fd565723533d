// The neon_bf16 GEMM micro-kernel: an 8 x 12 fp32 tile of BFMMLA 2 x 2 accumulators (packing and
// layouts: gemm_pack_bfmmla.cc).
//
// Register budget (32 q registers): an accumulator holds a 2 x 2 fp32 block (rows 2i, 2i+1 x columns
// 2j, 2j+1), so an M x N tile takes (M/2)*(N/2) accumulators, plus M/2 a-quads per K step and the
// b-quads in flight (each b-quad meets every a-quad right after its load, so 2 cover the load latency):
//   8 x 12: 4*6 = 24 + 4 + 2 = 30   (24 BFMMLA per 4 + 6 quad loads)
//   12 x 8: 6*4 = 24 + 6 + 2 = 32   (24 BFMMLA per 6 + 4 loads; no register left for the compiler)
//   8 x 8:  4*4 = 16 + 4 + 2 = 22   (16 BFMMLA per 8 loads)
// 8 x 12 keeps 24 independent accumulator chains: enough for 4 pipes x 6 cycles of BFMMLA latency on
// Neoverse V2 (4 x 4 with accumulator forwarding). Per-step estimate: docs/cpu.md, section ARM64.
//
// Numerics: BFMMLA (without FEAT_EBF16's FPCR.EBF) sums each two products, rounds (round-to-odd),
// adds into the accumulator, rounds again, twice per instruction; denormal inputs and results flush to
// zero. The fp32 sum is thus not the fp32-FMA chain of the other sets, but each output element's
// operations depend only on its row, column and K, never on the tile position or thread count.
#include <arm_neon.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/ukr_prefetch.h"

namespace tessera::cpu {
namespace {

constexpr int kNr = 12;  // columns of the tile
constexpr int kColPairs = kNr / 2;

// The a-quad of row pair i at quad q: a whole pair, or a lone last row (K contiguous) with zeros as
// its partner (that half of the 2 x 2 results is never stored).
template <bool kLone>
inline bfloat16x8_t load_a_quad(const uint16_t* pair, int q) {
  if constexpr (kLone) {
    return vreinterpretq_bf16_u16(vcombine_u16(vld1_u16(pair + 4 * q), vdup_n_u16(0)));
  } else {
    return vreinterpretq_bf16_u16(vld1q_u16(pair + 8 * q));
  }
}

// Row 2i's (lo) and row 2i+1's (hi) four columns 4v..4v+3 from the accumulators of column pairs 2v and
// 2v+1 (lanes: r0c0 r0c1 r1c0 r1c1).
inline void rows_of(float32x4_t left, float32x4_t right, float32x4_t* lo, float32x4_t* hi) {
  const float64x2_t l = vreinterpretq_f64_f32(left), r = vreinterpretq_f64_f32(right);
  *lo = vreinterpretq_f32_f64(vzip1q_f64(l, r));
  *hi = vreinterpretq_f32_f64(vzip2q_f64(l, r));
}

// M valid rows (1..8): (M+1)/2 row pairs, the last one lone when M is odd.
template <int M, bool kScaled>
void ukr_rows(const UkrArgs& p) {
  constexpr int kPairs = (M + 1) / 2;
  constexpr bool kOdd = M % 2 == 1;
  const uint16_t* a = static_cast<const uint16_t*>(p.a);
  const uint16_t* b = static_cast<const uint16_t*>(p.b);
  const uint16_t* pairs[kPairs];
#pragma GCC unroll 4
  for (int i = 0; i < kPairs; ++i) pairs[i] = a + int64_t(2 * i) * p.lda;
  const int groups = (p.kc + p.group - 1) / p.group;
  UkrPrefetcher prefetch(p);

  for (int g = 0; g < groups; ++g) {
    const int q_begin = g * p.group / 4;
    const int q_end = (g * p.group + p.group < p.kc ? g * p.group + p.group : p.kc) / 4;
    float32x4_t acc[kPairs][kColPairs];
#pragma GCC unroll 4
    for (int i = 0; i < kPairs; ++i)
#pragma GCC unroll 6
      for (int j = 0; j < kColPairs; ++j) acc[i][j] = vdupq_n_f32(0.0f);

    const uint16_t* bq = b + int64_t(q_begin) * 4 * kNr;
    for (int q = q_begin; q < q_end; ++q, bq += 4 * kNr) {
      if (prefetch.per_step && q % 8 == 0) prefetch.run(p, prefetch.per_step);  // 32 K values per step
      bfloat16x8_t av[kPairs];
#pragma GCC unroll 4
      for (int i = 0; i < kPairs; ++i)
        av[i] = (kOdd && i == kPairs - 1) ? load_a_quad<true>(pairs[i], q) : load_a_quad<false>(pairs[i], q);
#pragma GCC unroll 6
      for (int j = 0; j < kColPairs; ++j) {
        const bfloat16x8_t bv = vreinterpretq_bf16_u16(vld1q_u16(bq + 8 * j));
#pragma GCC unroll 4
        for (int i = 0; i < kPairs; ++i) acc[i][j] = vbfmmlaq_f32(acc[i][j], av[i], bv);
      }
    }

    const bool overwrite = g == 0 && !p.accumulate;
#pragma GCC unroll 4
    for (int i = 0; i < kPairs; ++i) {
      const int r = 2 * i;
      const bool has_hi = r + 1 < M;
      float* c_lo = p.c + int64_t(r) * p.ldc;
      float* c_hi = c_lo + p.ldc;
#pragma GCC unroll 3
      for (int v = 0; v < kNr / 4; ++v) {
        float32x4_t lo, hi;
        rows_of(acc[i][2 * v], acc[i][2 * v + 1], &lo, &hi);
        if constexpr (kScaled) {
          const float32x4_t cs = vld1q_f32(p.col_scale + g * p.col_scale_stride + 4 * v);
          const float* rs = p.row_scale + g * p.row_scale_stride;
          lo = vmulq_f32(lo, vmulq_n_f32(cs, rs[r]));
          if (has_hi) hi = vmulq_f32(hi, vmulq_n_f32(cs, rs[r + 1]));
        }
        vst1q_f32(c_lo + 4 * v, overwrite ? lo : vaddq_f32(vld1q_f32(c_lo + 4 * v), lo));
        if (has_hi) vst1q_f32(c_hi + 4 * v, overwrite ? hi : vaddq_f32(vld1q_f32(c_hi + 4 * v), hi));
      }
    }
  }
}

// Dispatch on the number of valid rows so edge tiles run the same code with fewer rows.
template <bool kScaled, int M = 8>
void ukr_dispatch(const UkrArgs& p) {
  if constexpr (M == 1) {
    ukr_rows<1, kScaled>(p);
  } else {
    if (p.m_valid >= M) return ukr_rows<M, kScaled>(p);
    ukr_dispatch<kScaled, M - 1>(p);
  }
}

}  // namespace

void gemm_ukr_neon_bf16_8x12(const UkrArgs& p) {
  if (p.row_scale) {
    ukr_dispatch<true>(p);
  } else {
    ukr_dispatch<false>(p);
  }
}

}  // namespace tessera::cpu
