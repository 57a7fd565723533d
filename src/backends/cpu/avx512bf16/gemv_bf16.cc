// Decode GEMV for the avx512bf16 kernel set: out[m, n] over K-contiguous weight rows (bf16 or e4m3)
// for M <= 8 activation rows. The weights are streamed exactly once at memory speed:
//  - each 64-value chunk of a weight row is converted to bf16 in registers (fp8: two byte lookups and
//    an in-lane zip, "lane order"; the activations are converted the same way so pairs line up) and
//    multiplied into every activation row with vdpbf16ps;
//  - NB weight rows are processed together (NB independent streams and accumulator chains); while one
//    block of rows is processed, the next block's lines are prefetched at the same K offsets: rows are
//    only a few KiB, too short for the hardware prefetcher to ramp up (measured: 12 -> 20 GB/s on 2
//    cores for M=1, N=K=7168 fp8, then ~59 GB/s with the kernel's other fixes);
//  - the main loop has no masks; a K tail is one masked chunk.
#include <immintrin.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/avx512bf16/masks.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

using avx512bf16::byte_mask;
using avx512bf16::word_mask;

using avx512bf16::E4m3Tables;

constexpr int kMaxM = 8;

const E4m3Tables& tables() {
  static const E4m3Tables t = avx512bf16::make_e4m3_tables();
  return t;
}


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

template <int M, int NB, bool kFp8>
struct Block {
  const char* w[NB];
  int64_t next_rows;  // byte distance to the same K offset of the next block's rows (0: none)
  __m512 acc[M][NB];

  template <bool kMasked>
  inline void chunk(const E4m3Tables& t, const uint16_t* a, int64_t lda, int64_t k, int64_t valid) {
    constexpr int es = kFp8 ? 1 : 2;
    __m512i w0[NB], w1[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      // Software pipeline: fetch the line the next block will need at this K offset.
      if (next_rows) _mm_prefetch(w[j] + next_rows + k * es, _MM_HINT_T0);
      load_chunk<kFp8, kMasked>(t, w[j] + k * es, valid, &w0[j], &w1[j]);
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      const __m512bh a0 = (__m512bh)_mm512_loadu_si512(a + m * lda + k);
      const __m512bh a1 = (__m512bh)_mm512_loadu_si512(a + m * lda + k + 32);
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
  const E4m3Tables t = tables();  // a local copy stays in registers (a reference was reloaded per group)
  constexpr int es = kFp8 ? 1 : 2;
  Block<M, NB, kFp8> blk;
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) blk.w[j] = static_cast<const char*>(p.w) + (n + j) * p.ldw * es;
  blk.next_rows = n + 2 * NB <= p.n1 ? NB * p.ldw * es : 0;

  const int64_t k_full = p.k / 64 * 64;
  const int64_t group = kScaled ? p.group : k_end - k_begin;
  // Weight-scale columns, hoisted: an integer division per group and row costs more than the group.
  int64_t w_scale_col[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) w_scale_col[j] = kScaled ? (p.w_row0 + n + j) / p.w_scale_rows : 0;
  __m512 tot[M][NB];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) tot[m][j] = _mm512_setzero_ps();

  // Group index counted, not divided: an integer division per group costs as much as a group at M=1.
  int64_t g = kScaled ? k_begin / group : 0;
  for (int64_t kb = k_begin; kb < k_end; kb += group, ++g) {
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
    if (kScaled) {
      // tot += acc * (a_scale[m] * w_scale[n]) for this group: NB + M broadcasts, then a mul and an fma
      // per accumulator.
      __m512 ws[NB];
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) ws[j] = _mm512_set1_ps(p.w_scale[g * p.w_scale_stride + w_scale_col[j]]);
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m) {
        const __m512 as = _mm512_set1_ps(p.a_scale[g * p.a_scale_stride + m]);
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j) tot[m][j] = _mm512_fmadd_ps(blk.acc[m][j], _mm512_mul_ps(as, ws[j]), tot[m][j]);
      }
    } else {
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j) tot[m][j] = _mm512_add_ps(tot[m][j], blk.acc[m][j]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      float* o = p.out + m * p.ldo + n + j;
      *o = first ? _mm512_reduce_add_ps(tot[m][j]) : *o + _mm512_reduce_add_ps(tot[m][j]);
    }
}

// Activation rows as bf16, K padded with zeros to a multiple of 64, in the weights' order (lane order
// when the weights are fp8). Same source type as the weights (the GEMM APIs never mix them).
void prepare_activations(const GemvArgs& p, uint16_t* dst, int64_t k_pad) {
  const E4m3Tables& t = tables();
  const bool fp8 = p.w_type == GemmSrcType::kE4M3;
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

// K is processed in blocks whose activation rows (M x kblock bf16) stay in L1 (~16 KiB): otherwise
// every weight row re-reads all activations from L2 (measured M=8, K=4096: 30 cycles per 64 weight
// bytes, L2-bandwidth bound). The block size depends only on M, K and the group, never on threads.
template <int M, bool kFp8, bool kScaled>
void gemv_rows(const GemvArgs& p, const uint16_t* a, int64_t lda) {
  constexpr int kNb = M <= 2 ? 4 : M <= 4 ? 2 : 1;
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  const int64_t unit = kScaled ? p.group : 64;
  const int64_t kblock = (16384 / (2 * M)) / unit * unit > unit ? (16384 / (2 * M)) / unit * unit : unit;
  for (int64_t kb = 0; kb < k_pad; kb += kblock) {
    const int64_t ke = kb + kblock < k_pad ? kb + kblock : k_pad;
    int64_t n = p.n0;
    for (; n + kNb <= p.n1; n += kNb) gemv_block<M, kNb, kFp8, kScaled>(p, a, lda, n, kb, ke, kb == 0);
    for (; n < p.n1; ++n) gemv_block<M, 1, kFp8, kScaled>(p, a, lda, n, kb, ke, kb == 0);
  }
}

template <bool kFp8, bool kScaled>
void gemv_dispatch(const GemvArgs& p, const uint16_t* a, int64_t lda) {
  switch (p.m) {
    case 1: return gemv_rows<1, kFp8, kScaled>(p, a, lda);
    case 2: return gemv_rows<2, kFp8, kScaled>(p, a, lda);
    case 3: return gemv_rows<3, kFp8, kScaled>(p, a, lda);
    case 4: return gemv_rows<4, kFp8, kScaled>(p, a, lda);
    case 5: return gemv_rows<5, kFp8, kScaled>(p, a, lda);
    case 6: return gemv_rows<6, kFp8, kScaled>(p, a, lda);
    case 7: return gemv_rows<7, kFp8, kScaled>(p, a, lda);
    default: return gemv_rows<8, kFp8, kScaled>(p, a, lda);
  }
}

void gemv(const GemvArgs& p) {
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  uint16_t* a = static_cast<uint16_t*>(p.scratch);
  prepare_activations(p, a, k_pad);
  const bool fp8 = p.w_type == GemmSrcType::kE4M3;
  const bool scaled = p.a_scale != nullptr;
  if (fp8) {
    if (scaled) gemv_dispatch<true, true>(p, a, k_pad); else gemv_dispatch<true, false>(p, a, k_pad);
  } else {
    if (scaled) gemv_dispatch<false, true>(p, a, k_pad); else gemv_dispatch<false, false>(p, a, k_pad);
  }
}

}  // namespace

GemvFn gemv_kernel_avx512bf16() { return gemv; }

}  // namespace tessera::cpu
