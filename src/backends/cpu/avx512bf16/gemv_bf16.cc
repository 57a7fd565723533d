// Decode GEMV for the avx512bf16 kernel set: out[m, n] over K-contiguous weight rows (bf16 or e4m3)
// for M <= 8 activation rows. The weights are streamed exactly once at memory speed:
//  - each 64-value chunk of a weight row is converted to bf16 in registers (fp8: two byte lookups and
//    an in-lane zip, "lane order"; the activations are converted the same way so pairs line up) and
//    multiplied into every activation row with vdpbf16ps;
//  - NB weight rows are processed together (NB independent streams and accumulator chains); while one
//    block of rows is processed, a later block's lines (at least 4 KiB on) are prefetched at the same K
//    offsets: rows are only a few KiB, too short for the hardware prefetcher to ramp up;
//  - the main loop has no masks; a K tail is one masked chunk;
//  - per 128-wide scale group, accumulators of row pairs fold into one register before scaling (below).
//  - M = 4 and 8 (5..7 padded to 8) fold each weight row's accumulators over activation rows instead
//    (gemv_quads_block), when K is whole 128-value groups;
//  - M <= 3 over streamed weights reads whole rows in K order instead, two at a time from the two halves
//    of the thread's range (gemv_sequential_rows): two sequential streams per thread.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include <immintrin.h>

#include <type_traits>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/avx512bf16/masks.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemv_row_count.h"

namespace tessera::cpu {
namespace {

using avx512bf16::byte_mask;
using avx512bf16::word_mask;

using avx512bf16::E4m3Tables;

constexpr int kMaxM = 8;
// Combined scales per kernel call (gemv_block: 4 per (group, row pair, activation row); gemv_quads_block:
// 1 per (group, row, activation row)). Cached weights come in K blocks of at most 8192 / M values (at most
// 128 / M groups of >= 64: <= 1024 entries); streamed ones in blocks sized to fill it (gemv_rows).
constexpr int kMaxCombined = 4096;

// Loads one 64-value chunk of K as two bf16 vectors (lane order for fp8). kMasked reads only `valid`
// values (zeros beyond).
template <bool kFp8, bool kMasked>
inline void load_chunk(const E4m3Tables& t, const char* src, int64_t valid, __m512i* v0, __m512i* v1) {
  if (kFp8) {
    const __m512i bytes = kMasked ? _mm512_maskz_loadu_epi8(byte_mask(valid), src) : _mm512_loadu_si512(src);
    avx512bf16::e4m3x64_to_bf16_lanes(t, bytes, v0, v1);
  } else {
    *v0 = kMasked ? _mm512_maskz_loadu_epi16(word_mask(valid), src) : _mm512_loadu_si512(src);
    *v1 = kMasked ? _mm512_maskz_loadu_epi16(word_mask(valid - 32), src + 64) : _mm512_loadu_si512(src + 64);
  }
}

// Byte distance from a block of nb weight rows (starting at row n, k_len values each) to the same K
// offset of the block it prefetches: the first one at least 4 KiB of weights on, since with short rows
// the next block is closer than the DRAM latency (long rows unchanged, further ahead worse). 0 when that
// block is past the caller's last row.
int64_t prefetch_rows_ahead(const GemvArgs& p, int64_t n, int nb, int64_t k_len, int es) {
  constexpr int64_t kPrefetchBytes = 4096;
  const int64_t block_bytes = nb * k_len * es;
  const int64_t ahead = (kPrefetchBytes + block_bytes - 1) / block_bytes;
  return n + (ahead + 1) * nb <= p.n1 ? ahead * nb * p.ldw * es : 0;
}

// Fetches the lines of one 64-value chunk (one line of fp8, two of bf16) into L2, not L1: into L1 the
// prefetches filled the core's L1 miss buffers and stalled (Zen 4: 1.0-1.55x slower across shapes).
// Prefetching only the first of bf16's two lines left M=4 well below the rate with both.
template <bool kFp8>
inline void prefetch_chunk(const char* src) {
  _mm_prefetch(src, _MM_HINT_T1);
  if (!kFp8) _mm_prefetch(src + 64, _MM_HINT_T1);
}

template <int M, int NB, bool kFp8>
struct Block {
  const char* w[NB];
  int64_t next_rows;  // byte distance to the same K offset of the next block's rows (0: none)
  __m512 acc[M][NB];

  // Always inlined: GCC kept it out of line at M = 4, a call per 64 K values with the tables and the
  // accumulators passed through memory.
  template <bool kMasked>
  __attribute__((always_inline)) inline void chunk(const E4m3Tables& t, const uint16_t* a, int64_t lda, int64_t k,
                                                   int64_t valid) {
    constexpr int es = kFp8 ? 1 : 2;
    __m512i w0[NB], w1[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      // Software pipeline: fetch the line the next block will need at this K offset.
      if (next_rows) prefetch_chunk<kFp8>(w[j] + next_rows + k * es);
      load_chunk<kFp8, kMasked>(t, w[j] + k * es, valid, &w0[j], &w1[j]);
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      __m512i a0i = _mm512_loadu_si512(a + m * lda + k), a1i = _mm512_loadu_si512(a + m * lda + k + 32);
      // Opaque to the optimiser, so GCC keeps the pair in registers for all NB rows instead of loading it
      // again for each (it did: 16 instead of 8 loads per chunk at M = 4).
      asm("" : "+v"(a0i), "+v"(a1i));
      const __m512bh a0 = (__m512bh)a0i, a1 = (__m512bh)a1i;
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        acc[m][j] = _mm512_dpbf16_ps(acc[m][j], a0, (__m512bh)w0[j]);
        acc[m][j] = _mm512_dpbf16_ps(acc[m][j], a1, (__m512bh)w1[j]);
      }
    }
  }
};

// out[m][n..n+NB) (+)= the K range [k_begin, k_end) of the dot products (k_begin a multiple of the
// scale group and of 64). `first` overwrites out, later K-blocks add to it.
template <int M, int NB, bool kFp8, bool kScaled>
void gemv_block(const GemvArgs& p, const uint16_t* a, int64_t lda, int64_t n, int64_t k_begin, int64_t k_end,
                bool first) {
  // A local copy stays in registers (a reference was reloaded per group).
  const E4m3Tables t = avx512bf16::e4m3_tables();
  constexpr int es = kFp8 ? 1 : 2;
  Block<M, NB, kFp8> blk;
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) blk.w[j] = static_cast<const char*>(p.w) + (n + j) * p.ldw * es;
  blk.next_rows = prefetch_rows_ahead(p, n, NB, k_end - k_begin, es);

  const int64_t k_full = p.k / 64 * 64;
  const int64_t group = kScaled ? p.group : k_end - k_begin;
  // Weight rows are taken in pairs (a lone row pairs with itself). After each group a pair's two
  // accumulators fold into one register, four lanes of each row per 128-bit block ({r0, r0, r1, r1}:
  // two in-lane shuffles and an add), which is then scaled into the pair's total: half the registers of
  // one total per row, so M = 4 with two rows fits the 32 registers. Every row's arithmetic is the same
  // in either slot of a pair or alone, so the bits never depend on how rows were split between threads.
  constexpr int kPairs = (NB + 1) / 2;
  // The pairs' scales a_scale[g][m] * w_scale(g, row) of this K range as {s0, s0, s1, s1} per (group,
  // pair, m), computed before the main loop.
  alignas(64) float combined[kMaxCombined];
  if constexpr (kScaled) {
    int64_t wrow[NB];  // each row's weight-scale row, divided once rather than per group
    for (int j = 0; j < NB; ++j) wrow[j] = (p.w_row0 + n + j) / p.w_scale_rows;
    float* c = combined;
    for (int64_t g = k_begin / group; g * group < k_end; ++g) {
      const float* as = p.a_scale + g * p.a_scale_stride;
#pragma GCC unroll 2
      for (int q = 0; q < kPairs; ++q) {
        const int j0 = 2 * q, j1 = NB > 1 ? 2 * q + 1 : 0;
        const float w0 = p.w_scale[g * p.w_scale_stride + wrow[j0]];
        const float w1 = p.w_scale[g * p.w_scale_stride + wrow[j1]];
        for (int m = 0; m < M; ++m, c += 4) {
          c[0] = c[1] = as[m] * w0;
          c[2] = c[3] = as[m] * w1;
        }
      }
    }
  }
  __m512 tot[M][kPairs];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
    for (int q = 0; q < kPairs; ++q) tot[m][q] = _mm512_setzero_ps();

  const float* c = combined;
  for (int64_t kb = k_begin; kb < k_end; kb += group, c += kPairs * M * 4) {
    const int64_t ke = kb + group < k_end ? kb + group : k_end;
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) blk.acc[m][j] = _mm512_setzero_ps();
    if (group == 128 && ke == kb + 128 && ke <= k_full) {
      // The common case (128-wide scale groups, no tail) as straight-line code: loop control per group
      // was a third of the instructions at M=4.
      blk.template chunk<false>(t, a, lda, kb, 64);
      blk.template chunk<false>(t, a, lda, kb + 64, 64);
    } else {
      const int64_t ke_full = ke < k_full ? ke : k_full;
      int64_t k = kb;
      for (; k < ke_full; k += 64) blk.template chunk<false>(t, a, lda, k, 64);
      if (k < ke) blk.template chunk<true>(t, a, lda, k, p.k - k);
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
      for (int q = 0; q < kPairs; ++q) {
        const __m512 x0 = blk.acc[m][2 * q], x1 = NB > 1 ? blk.acc[m][2 * q + 1] : x0;
        const __m512 folded = _mm512_add_ps(_mm512_shuffle_ps(x0, x1, 0x44), _mm512_shuffle_ps(x0, x1, 0xEE));
        tot[m][q] = kScaled
                        ? _mm512_fmadd_ps(folded, _mm512_broadcast_f32x4(_mm_load_ps(c + (q * M + m) * 4)), tot[m][q])
                        : _mm512_add_ps(tot[m][q], folded);
      }
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 2
    for (int q = 0; q < kPairs; ++q) {
      const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(tot[m][q]), _mm512_extractf32x8_ps(tot[m][q], 1));
      const __m128 v = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
      const float r[2] = {_mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1)),
                          _mm_cvtss_f32(_mm_shuffle_ps(v, v, 2)) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 3))};
      for (int i = 0; i < (NB > 1 ? 2 : 1); ++i) {
        float* o = p.out + m * p.ldo + n + 2 * q + i;
        *o = first ? r[i] : *o + r[i];
      }
    }
}

// Four accumulators x0..x3 (one per activation row of a quad) -> one register holding, in each 128-bit
// block, {sum of x0's four lanes, x1's, x2's, x3's}: two rounds of in-lane shuffles and adds.
inline __m512 fold_quad(__m512 x0, __m512 x1, __m512 x2, __m512 x3) {
  const __m512 f01 = _mm512_add_ps(_mm512_shuffle_ps(x0, x1, 0x44), _mm512_shuffle_ps(x0, x1, 0xEE));
  const __m512 f23 = _mm512_add_ps(_mm512_shuffle_ps(x2, x3, 0x44), _mm512_shuffle_ps(x2, x3, 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(f01, f23, 0x88), _mm512_shuffle_ps(f01, f23, 0xDD));
}

// Activation rows in quads (M = 4, or 8 with M = 5..7 padded by zero rows), NB weight rows, a K range
// of whole 128-value groups. M = 8: each weight row's four accumulators of a quad fold into one
// register per group ({m0, m1, m2, m3} per 128-bit block: two rounds of in-lane shuffles and adds),
// which one FMA scales into the row's total. M = 4 does not fold: each accumulator is scaled into its
// own total (4 FMAs per row and group instead of 6 shuffles, 3 adds and an FMA; the 12 totals live
// mostly in memory, touched once per group), which was faster at M=4; M=8 unfolded was slower. A row's
// arithmetic never involves the other rows of its block, so NB (4, 3 or 2 in the main loop, 1 for the
// rest) does not change its bits. 3 weight rows x 4 activation
// rows give 12 independent vdpbf16ps chains (latency ~6 cycles, 2 per cycle) without spilling the tables.
// Faster than the pair-folding gemv_block, which M=4 and 8 still use for K tails.
template <int M, int NB, bool kFp8, bool kScaled, bool kFold>
void gemv_quads_block(const GemvArgs& p, const uint16_t* a, int64_t lda, int64_t n, int64_t k_begin, int64_t k_end,
                      bool first) {
  static_assert(M % 4 == 0 && M <= kMaxM, "activation rows in whole quads");
  constexpr int Q = M / 4;
  static_assert(kFold || M == 4, "M = 8 always folds");
  const E4m3Tables t = avx512bf16::e4m3_tables();
  constexpr int es = kFp8 ? 1 : 2;
  const char* w[NB];
  for (int j = 0; j < NB; ++j) w[j] = static_cast<const char*>(p.w) + (n + j) * p.ldw * es;
  const int64_t next_rows = prefetch_rows_ahead(p, n, NB, k_end - k_begin, es);
  // a_scale[g][m] * w_scale(g, row) per (group, row, m); padded rows get 0.
  alignas(32) float combined[kMaxCombined];
  // Vectorised, with each row's scale row divided once: the scalar loop with a division per (group,
  // row) cost M=4 1.5 cycles per 64 weight bytes (9.6 -> 8.1).
  if constexpr (kScaled) {
    int64_t wrow[NB];
    for (int j = 0; j < NB; ++j) wrow[j] = (p.w_row0 + n + j) / p.w_scale_rows;
    const __mmask8 live = __mmask8((1u << p.m) - 1);
    float* c = combined;
    for (int64_t g = k_begin / 128; g * 128 < k_end; ++g) {
      const __m256 as = _mm256_maskz_loadu_ps(live, p.a_scale + g * p.a_scale_stride);
      for (int j = 0; j < NB; ++j, c += M) {
        const __m256 cj = _mm256_mul_ps(as, _mm256_set1_ps(p.w_scale[g * p.w_scale_stride + wrow[j]]));
        if constexpr (M == 4) {
          _mm_store_ps(c, _mm256_castps256_ps128(cj));
        } else {
          _mm256_store_ps(c, cj);
        }
      }
    }
  }
  // Totals: folded, one register per (row, quad); unfolded (M = 4), one per (activation row, row).
  __m512 tot[NB][Q], row_tot[kFold ? 1 : M][NB];
  for (int j = 0; j < NB; ++j) {
    for (int q = 0; q < Q; ++q) tot[j][q] = _mm512_setzero_ps();
    for (int m = 0; m < (kFold ? 1 : M); ++m) row_tot[m][j] = _mm512_setzero_ps();
  }
  const float* c = combined;
  for (int64_t kb = k_begin; kb < k_end; kb += 128, c += NB * M) {
    __m512 acc[M][NB];
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < NB; ++j) acc[m][j] = _mm512_setzero_ps();
    for (int64_t k = kb; k < kb + 128; k += 64) {
      __m512i w0[NB], w1[NB];
      for (int j = 0; j < NB; ++j) {
        if (next_rows) prefetch_chunk<kFp8>(w[j] + next_rows + k * es);
        load_chunk<kFp8, false>(t, w[j] + k * es, 64, &w0[j], &w1[j]);
      }
      for (int m = 0; m < M; ++m) {
        __m512i a0i = _mm512_loadu_si512(a + m * lda + k), a1i = _mm512_loadu_si512(a + m * lda + k + 32);
        asm("" : "+v"(a0i), "+v"(a1i));  // loaded once for all NB rows (GCC reloaded them per row)
        const __m512bh a0 = (__m512bh)a0i, a1 = (__m512bh)a1i;
        for (int j = 0; j < NB; ++j) {
          acc[m][j] = _mm512_dpbf16_ps(acc[m][j], a0, (__m512bh)w0[j]);
          acc[m][j] = _mm512_dpbf16_ps(acc[m][j], a1, (__m512bh)w1[j]);
        }
      }
    }
    if constexpr (!kFold) {
      for (int j = 0; j < NB; ++j)
        for (int m = 0; m < M; ++m)
          row_tot[m][j] = kScaled ? _mm512_fmadd_ps(acc[m][j], _mm512_set1_ps(c[M * j + m]), row_tot[m][j])
                                  : _mm512_add_ps(row_tot[m][j], acc[m][j]);
      continue;
    }
    for (int j = 0; j < NB; ++j)
      for (int q = 0; q < Q; ++q) {
        const __m512 f = fold_quad(acc[4 * q][j], acc[4 * q + 1][j], acc[4 * q + 2][j], acc[4 * q + 3][j]);
        tot[j][q] = kScaled ? _mm512_fmadd_ps(f, _mm512_broadcast_f32x4(_mm_load_ps(c + M * j + 4 * q)), tot[j][q])
                            : _mm512_add_ps(tot[j][q], f);
      }
  }
  // Unfolded totals fold once at the end (four separate horizontal sums cost M=4, K=512 10%).
  if constexpr (!kFold) {
    for (int j = 0; j < NB; ++j) tot[j][0] = fold_quad(row_tot[0][j], row_tot[1][j], row_tot[2][j], row_tot[3][j]);
  }
  for (int j = 0; j < NB; ++j)
    for (int q = 0; q < Q; ++q) {
      const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(tot[j][q]), _mm512_extractf32x8_ps(tot[j][q], 1));
      alignas(16) float r[4];
      _mm_store_ps(r, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
      for (int i = 0; i < 4 && 4 * q + i < p.m; ++i) {
        float* o = p.out + (4 * q + i) * p.ldo + n + j;
        *o = first ? r[i] : *o + r[i];
      }
    }
}

// M <= 3 over streamed weights: whole weight rows in K order, two at a time (a row from each half of
// the thread's range), so each thread reads two sequential streams, each with a software prefetch
// kSequentialPrefetchBytes ahead, instead of NB rows a row apart: NB short rows read a row apart fall
// well short of the DRAM read rate, two sequential streams reach it, and without the software prefetch
// they fall short again (8 KiB ahead is the shortest distance that gets the full rate).
// Two accumulator chains per activation row (even and odd chunks of a group) are summed at the end of
// each group, then scaled into the row's total. A row's arithmetic is the same alone or paired and
// never depends on its neighbours, so neither does its result on how rows were split between threads.
constexpr int64_t kSequentialPrefetchBytes = 8192;

template <int M, int R, bool kFp8, bool kScaled>
void gemv_sequential_rows(const GemvArgs& p, const uint16_t* a, int64_t lda, const int64_t* n,
                          const int64_t* w_scale_row) {
  const E4m3Tables t = avx512bf16::e4m3_tables();
  constexpr int es = kFp8 ? 1 : 2;
  const char* w[R];
  const float* w_scale[R];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    w[r] = static_cast<const char*>(p.w) + n[r] * p.ldw * es;
    w_scale[r] = kScaled ? p.w_scale + w_scale_row[r] : nullptr;
  }
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  const int64_t group = kScaled ? p.group : k_pad;
  const float* a_scale = p.a_scale;
  __m512 tot[R][M];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) tot[r][m] = _mm512_setzero_ps();
  for (int64_t kb = 0; kb < k_pad; kb += group) {
    const int64_t ke = kb + group < k_pad ? kb + group : k_pad;
    __m512 even[R][M], odd[R][M];  // the chains of the group's even and odd chunks
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) even[r][m] = odd[r][m] = _mm512_setzero_ps();
    // One 64-value chunk of every row into one chain of every activation row.
    auto chunk = [&](__m512(*acc)[M], int64_t k) __attribute__((always_inline)) {
      __m512i w0[R], w1[R];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        prefetch_chunk<kFp8>(w[r] + k * es + kSequentialPrefetchBytes);
        if (k + 64 <= p.k) {
          load_chunk<kFp8, false>(t, w[r] + k * es, 64, &w0[r], &w1[r]);
        } else {
          load_chunk<kFp8, true>(t, w[r] + k * es, p.k - k, &w0[r], &w1[r]);
        }
      }
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) {
        const __m512bh a0 = (__m512bh)_mm512_loadu_si512(a + m * lda + k);
        const __m512bh a1 = (__m512bh)_mm512_loadu_si512(a + m * lda + k + 32);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r)
          acc[r][m] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[r][m], a0, (__m512bh)w0[r]), a1, (__m512bh)w1[r]);
      }
    };
    for (int64_t k = kb; k < ke; k += 128) {
      chunk(even, k);
      if (k + 64 < ke) chunk(odd, k + 64);
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) {
        const __m512 sum = _mm512_add_ps(even[r][m], odd[r][m]);
        tot[r][m] = kScaled ? _mm512_fmadd_ps(sum, _mm512_set1_ps(a_scale[m] * w_scale[r][0]), tot[r][m])
                            : _mm512_add_ps(tot[r][m], sum);
      }
    if (kScaled) {
      a_scale += p.a_scale_stride;
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) w_scale[r] += p.w_scale_stride;
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) p.out[m * p.ldo + n[r]] = _mm512_reduce_add_ps(tot[r][m]);
}

// M = 4 stops folding per group from this K range on: below it, the unfolded totals' setup and final
// fold cost more than the per-group folds saved (1 thread, weights in L2, us, fold / unfolded:
// K=512 24.4 / 26.5, K=1024 24.0 / 22.6, K=2048 23.0 / 20.0, K=7168 23.7 / 21.3).
constexpr int64_t kUnfoldedMinK = 1024;

// gemv_quads_block over K range [kb, ke) of rows [n, n + NB), folding or not by M and the range's length
// (never by the thread count).
template <int M, int NB, bool kFp8, bool kScaled>
void gemv_quads_range(const GemvArgs& p, const uint16_t* a, int64_t lda, int64_t n, int64_t kb, int64_t ke) {
  if (M == 4 && ke - kb >= kUnfoldedMinK) {
    gemv_quads_block<M, NB, kFp8, kScaled, M != 4>(p, a, lda, n, kb, ke, kb == 0);
  } else {
    gemv_quads_block<M, NB, kFp8, kScaled, true>(p, a, lda, n, kb, ke, kb == 0);
  }
}

// Whether gemv_quads_block takes p: whole 128-value groups (scaled or not) and no K tail.
bool quads_apply(const GemvArgs& p) {
  return p.m >= 4 && p.k % 128 == 0 && (p.a_scale == nullptr || p.group == 128);
}

// Activation rows as bf16, K padded with zeros to a multiple of 64, in the weights' order (lane order
// when the weights are fp8), then zero rows up to `rows`. Same source type as the weights (the GEMM
// APIs never mix them).
void prepare_activations(const GemvArgs& p, uint16_t* dst, int64_t k_pad, int rows) {
  const E4m3Tables& t = avx512bf16::e4m3_tables();
  const bool fp8 = p.w_type == GemmSrcType::kE4M3;
  for (int m = p.m; m < rows; ++m)
    for (int64_t k = 0; k < k_pad; k += 32) _mm512_storeu_si512(dst + m * k_pad + k, _mm512_setzero_si512());
  for (int m = 0; m < p.m; ++m) {
    const char* row = static_cast<const char*>(p.a) + m * p.a_stride * (fp8 ? 1 : 2);
    for (int64_t k = 0; k < k_pad; k += 64) {
      __m512i v0, v1;
      if (fp8) {
        load_chunk<true, true>(t, row + k, p.k - k, &v0, &v1);
      } else {
        load_chunk<false, true>(t, row + 2 * k, p.k - k, &v0, &v1);
      }
      _mm512_storeu_si512(dst + m * k_pad + k, v0);
      _mm512_storeu_si512(dst + m * k_pad + k + 32, v1);
    }
  }
}

// Rows [p.n0, p.n1) in blocks of NB (then single rows), K in blocks of kblock: K blocks outside and
// rows inside, or rows outside (each block of rows over all its K blocks before the next).
template <int NB, class BlockFn, class RowFn>
void sweep(const GemvArgs& p, int64_t k_pad, int64_t kblock, bool rows_outside, BlockFn block, RowFn row) {
  auto k_end = [&](int64_t kb) { return kb + kblock < k_pad ? kb + kblock : k_pad; };
  auto rows = [&](int64_t kb, int64_t ke) {
    int64_t n = p.n0;
    for (; n + NB <= p.n1; n += NB) block(n, kb, ke);
    for (; n < p.n1; ++n) row(n, kb, ke);
  };
  if (!rows_outside) {
    for (int64_t kb = 0; kb < k_pad; kb += kblock) rows(kb, k_end(kb));
    return;
  }
  auto k_blocks = [&](auto&& fn, int64_t n) {
    for (int64_t kb = 0; kb < k_pad; kb += kblock) fn(n, kb, k_end(kb));
  };
  int64_t n = p.n0;
  for (; n + NB <= p.n1; n += NB) k_blocks(block, n);
  for (; n < p.n1; ++n) k_blocks(row, n);
}

// Cached weights: K blocks whose activation rows (M x kblock bf16) stay in L1 (~16 KiB), outside the
// rows; otherwise every weight row re-reads all activations from L2 (L2-bandwidth bound). Streamed
// weights: rows outside, each in K blocks as long as the combined scales allow (128-wide groups: whole
// rows up to K = 16384-65536 by M), activations from L2.
// K blocks split a row into pieces a row apart, a pattern DRAM serves far below its sequential rate;
// with cached weights whole rows cost more cycles per 64 bytes than K blocks, hence both orders. The
// blocking depends on M, K, the group and p.streamed, never on threads. M <= 3 over streamed weights
// takes gemv_sequential_rows instead (whole rows, two at a time).
template <int M, bool kFp8, bool kScaled>
void gemv_rows(const GemvArgs& p, const uint16_t* a, int64_t lda) {
  if constexpr (M <= 3) {
    if (p.streamed) {
      // Rows of the first half of the range paired with those of the second half: two sequential
      // streams per thread. The weight-scale row of each advances every w_scale_rows rows: no 64-bit
      // division per row (M=1, K=512, weights in L3: +2-5%). Unscaled calls never read it.
      struct Cursor {
        int64_t n, scale_row, in_scale_row, rows_per_scale;
        void next() {
          ++n;
          if (++in_scale_row == rows_per_scale) in_scale_row = 0, ++scale_row;
        }
      };
      const int64_t rows_per_scale = kScaled ? p.w_scale_rows : 1;
      auto cursor = [&](int64_t n) {
        return Cursor{n, (p.w_row0 + n) / rows_per_scale, (p.w_row0 + n) % rows_per_scale, rows_per_scale};
      };
      const int64_t half = (p.n1 - p.n0) / 2;
      Cursor lo = cursor(p.n0), hi = cursor(p.n0 + half);
      for (int64_t i = 0; i < half; ++i, lo.next(), hi.next()) {
        const int64_t n[2] = {lo.n, hi.n}, sr[2] = {lo.scale_row, hi.scale_row};
        gemv_sequential_rows<M, 2, kFp8, kScaled>(p, a, lda, n, sr);
      }
      for (; hi.n < p.n1; hi.next()) gemv_sequential_rows<M, 1, kFp8, kScaled>(p, a, lda, &hi.n, &hi.scale_row);
      return;
    }
  }
  constexpr int kNb = M <= 2 ? 4 : M <= 4 ? 2 : 1;
  // Weight rows per quad block: M = 4 takes 3 over cached weights and 4 over streamed ones (4 rows share
  // each activation load: fewer activation lines through L1, which the whole-row activations of
  // streamed weights overflow; measurements in docs/notes/2026-12-05-measurements-moved-from-source.md).
  constexpr int kQuadNb = M == 4 ? 3 : 2;
  constexpr int kStreamedQuadNb = M == 4 ? 4 : 2;
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  const bool quads = (M == 4 || M == 8) && quads_apply(p);
  const int64_t unit = kScaled ? p.group : quads ? 128 : 64;  // K blocks of whole groups
  int64_t kblock = (16384 / (2 * M)) / unit * unit > unit ? (16384 / (2 * M)) / unit * unit : unit;
  if (p.streamed) {
    const int64_t groups = quads ? kMaxCombined / (kStreamedQuadNb * M) : kMaxCombined / (4 * ((kNb + 1) / 2) * M);
    kblock = kScaled ? groups * unit : (k_pad + unit - 1) / unit * unit;
  }
  if constexpr (M == 4 || M == 8) {
    if (quads) {
      auto quads_sweep = [&](auto rows_per_block) {
        constexpr int NB = decltype(rows_per_block)::value;
        sweep<NB>(
            p, k_pad, kblock, p.streamed,
            [&](int64_t n, int64_t kb, int64_t ke) { gemv_quads_range<M, NB, kFp8, kScaled>(p, a, lda, n, kb, ke); },
            [&](int64_t n, int64_t kb, int64_t ke) { gemv_quads_range<M, 1, kFp8, kScaled>(p, a, lda, n, kb, ke); });
      };
      if (p.streamed) {
        quads_sweep(std::integral_constant<int, kStreamedQuadNb>());
      } else {
        quads_sweep(std::integral_constant<int, kQuadNb>());
      }
      return;
    }
  }
  sweep<kNb>(
      p, k_pad, kblock, p.streamed,
      [&](int64_t n, int64_t kb, int64_t ke) { gemv_block<M, kNb, kFp8, kScaled>(p, a, lda, n, kb, ke, kb == 0); },
      [&](int64_t n, int64_t kb, int64_t ke) { gemv_block<M, 1, kFp8, kScaled>(p, a, lda, n, kb, ke, kb == 0); });
}

template <bool kFp8, bool kScaled>
void gemv_dispatch(const GemvArgs& p, const uint16_t* a, int64_t lda) {
  // 5..7 rows run as 8 with zero rows when the quad kernel applies (M=6: 29.6 -> 14.9 cycles).
  if (p.m >= 5 && p.m <= 7 && quads_apply(p)) return gemv_rows<8, kFp8, kScaled>(p, a, lda);
  with_gemv_row_count(p.m, [&](auto rows_c) { gemv_rows<decltype(rows_c)::value, kFp8, kScaled>(p, a, lda); });
}

void gemv(const GemvArgs& p) {
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  uint16_t* a = static_cast<uint16_t*>(p.scratch);
  prepare_activations(p, a, k_pad, p.m > 4 && quads_apply(p) ? 8 : p.m);
  const bool fp8 = p.w_type == GemmSrcType::kE4M3;
  const bool scaled = p.a_scale != nullptr;
  if (fp8) {
    if (scaled)
      gemv_dispatch<true, true>(p, a, k_pad);
    else
      gemv_dispatch<true, false>(p, a, k_pad);
  } else {
    if (scaled)
      gemv_dispatch<false, true>(p, a, k_pad);
    else
      gemv_dispatch<false, false>(p, a, k_pad);
  }
}

}  // namespace

GemvFn gemv_kernel_avx512bf16() {
  return gemv;
}

}  // namespace tessera::cpu
