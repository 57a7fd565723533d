// Decode GEMV over packed FP4 weights (avx512bf16): 128 K-values of a weight row are 64 bytes, converted
// with one 16-bit table lookup (vpermw) per 32 values into "fp4 lane order" (the activations are permuted
// the same way once per call). In that order every 128-bit lane of a chunk's products comes from one
// 32-value block, so the per-32 power-of-two scales multiply each chunk's fp32 partial sums lane-wise
// (exact), together with the activation scale in one FMA per row and chunk. Each chunk starts fresh
// accumulators, so chunks do not wait on each other's vdpbf16ps chains. This replaced a kernel that
// folded the scales into the bf16 exponents and used byte lookups and zips: fewer ops per chunk.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include <immintrin.h>

#include "backends/cpu/avx512bf16/fp4_lanes.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/gemv_row_count.h"

namespace tessera::cpu {
namespace {

using avx512bf16::fp4x128_to_bf16_lanes;

const __m512i& fp4_table() {
  static const __m512i t = avx512bf16::make_fp4_table(0);
  return t;
}

// fp32 2^(e_L - 127) in every float of 128-bit lane L, from a word of four exponent bytes (lane L takes
// byte L); exact for 1 <= e <= 254.
inline __m512 lane_scales(uint32_t word) {
  alignas(64) static const uint8_t kIdx[64] = {0, 64, 64, 64, 0, 64, 64, 64, 0, 64, 64, 64, 0, 64, 64, 64,
                                               1, 64, 64, 64, 1, 64, 64, 64, 1, 64, 64, 64, 1, 64, 64, 64,
                                               2, 64, 64, 64, 2, 64, 64, 64, 2, 64, 64, 64, 2, 64, 64, 64,
                                               3, 64, 64, 64, 3, 64, 64, 64, 3, 64, 64, 64, 3, 64, 64, 64};
  const __mmask64 low_bytes = 0x1111111111111111ull;
  const __m512i e = _mm512_maskz_permutexvar_epi8(low_bytes, _mm512_load_si512(kIdx), _mm512_set1_epi32(int(word)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}

template <int M, int NB, bool kScaled>
bool gemv_block(const GemvFp4Args& p, const uint16_t* a, int64_t lda, int64_t n) {
  const __m512i t = fp4_table();
  const uint8_t* w[NB];
  const uint8_t* ex[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) {
    w[j] = p.w + (n + j) * p.ldw;
    ex[j] = p.w_exp + (p.w_row0 + n + j) * p.exp_row_bytes;
  }
  // Prefetch distance: the first block at least kPrefetchBytes on. The next block (2 KiB at K=2048)
  // was closer than the DRAM latency; 16 KiB ahead was no better than 8.
  constexpr int64_t kPrefetchBytes = 8192;
  const int64_t block_bytes = NB * ((p.k + 1) / 2);
  const int64_t ahead = (kPrefetchBytes + block_bytes - 1) / block_bytes;
  const int64_t next = n + (ahead + 1) * NB <= p.n1 ? ahead * NB * p.ldw : 0;
  const int64_t k_pad = (p.k + 127) / 128 * 128;
  const int64_t group = kScaled ? p.a_group : k_pad;  // a multiple of 128: whole chunks
  __m512 tot[M][NB];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) tot[m][j] = _mm512_setzero_ps();
  // Running byte-wise min / max of the exponents, checked once at the end.
  __m128i e_min = _mm_set1_epi8(char(0xFF)), e_max = _mm_setzero_si128();
  for (int64_t k = 0; k < k_pad; k += 128) {  // 128 values = 64 bytes = one exponent word per row
    __m512i v[NB][4];
    __m512 scale[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      // Into L2, not L1: prefetcht0 filled the L1 miss buffers (Zen 4, masked decode of 5 rows over
      // 4096 x 2048 e2m1 weights: 1.17-1.20 -> 0.70-0.72 ms).
      if (next) _mm_prefetch(reinterpret_cast<const char*>(w[j] + next + k / 2), _MM_HINT_T1);
      __m512i bytes;
      uint32_t word;
      avx512bf16::fp4_weight_chunk(p, w[j], ex[j], k, &bytes, &word);
      avx512bf16::fp4_exponent_range_add(word, &e_min, &e_max);
      fp4x128_to_bf16_lanes(t, bytes, v[j]);
      scale[j] = lane_scales(word);
    }
    const float* as = kScaled ? p.a_scale + (k / group) * p.a_scale_stride : nullptr;
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      // M = 1: two short vdpbf16ps chains per row (even and odd q), added before scaling: faster than one
      // chain of four. M >= 2 has chains enough across its activation rows, and the add is one op in ~40
      // per 64 bytes: there one chain of four is faster.
      constexpr bool kSplit = M == 1;
      __m512 part[NB], part2[NB];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        __m512i avi = _mm512_loadu_si512(a + m * lda + k + 32 * q);
        asm("" : "+v"(avi));  // loaded once for the NB rows (GCC reloaded it per row)
        const __m512bh av = (__m512bh)avi;
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j) {
          if (kSplit && (q & 1))
            part2[j] = _mm512_dpbf16_ps(q < 2 ? _mm512_setzero_ps() : part2[j], av, (__m512bh)v[j][q]);
          else
            part[j] = _mm512_dpbf16_ps(q < (kSplit ? 2 : 1) ? _mm512_setzero_ps() : part[j], av, (__m512bh)v[j][q]);
        }
      }
      if constexpr (kSplit)
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j) part[j] = _mm512_add_ps(part[j], part2[j]);
      // The weight scale is a power of two: part * (w_scale * a_scale) rounds once, like
      // (part * w_scale) * a_scale would.
      const __m512 sa = _mm512_set1_ps(kScaled ? as[m] : 1.0f);
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) tot[m][j] = _mm512_fmadd_ps(part[j], _mm512_mul_ps(scale[j], sa), tot[m][j]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) p.out[m * p.ldo + n + j] = _mm512_reduce_add_ps(tot[m][j]);
  return avx512bf16::fp4_exponents_within(e_min, e_max, 1, 254);
}

// Activations as bf16 rows of round_up(K, 128) values in the weights' lane order, zero beyond K; with
// `exps`, each finite nonzero value times its group's power of two. Carrying power-of-two activation
// scales spares the kernel one multiply per activation row, weight row and chunk: M=4 17.1 -> 15.8
// cycles per 64 packed bytes (single core, L2).
void prepare_activations(const GemvFp4Args& p, uint16_t* dst, int64_t k_pad, const int* exps) {
  for (int m = 0; m < p.m; ++m)
    for (int64_t k = 0; k < k_pad; k += 128) {
      __m512i lanes[4];
      avx512bf16::fp4_activation_chunk_lanes(p, m, k, exps, lanes);
      for (int q = 0; q < 4; ++q) _mm512_storeu_si512(dst + m * k_pad + k + 32 * q, lanes[q]);
    }
}

template <int M, bool kScaled>
bool gemv_rows(const GemvFp4Args& p, const uint16_t* a, int64_t lda) {
  // Single core, weights in L2, cycles per 64 packed bytes: M=1 8.1 with two rows per block, 6.1 with
  // four; M=2 11.1 with two, 11.9 with four; M=4 ~16 (compute-bound: 16 vdpbf16ps per 64 bytes and ~40
  // vector ops in all, at the ~2.4 per cycle this core sustains for such a mix).
  constexpr int kNb = M == 1 ? 4 : M <= 4 ? 2 : 1;
  bool ok = true;
  int64_t n = p.n0;
  for (; n + kNb <= p.n1; n += kNb) ok &= gemv_block<M, kNb, kScaled>(p, a, lda, n);
  for (; n < p.n1; ++n) ok &= gemv_block<M, 1, kScaled>(p, a, lda, n);
  return ok;
}

template <bool kScaled>
bool dispatch(const GemvFp4Args& p, const uint16_t* a, int64_t lda) {
  return with_gemv_row_count(p.m, [&](auto rows_c) { return gemv_rows<decltype(rows_c)::value, kScaled>(p, a, lda); });
}

bool gemv_fp4(const GemvFp4Args& p) {
  const int64_t k_pad = (p.k + 127) / 128 * 128;
  uint16_t* a = static_cast<uint16_t*>(p.scratch);
  // Power-of-two activation scales ride on the activations for M >= 2 (M = 1 is faster with the scaled
  // kernel).
  int* exps = avx512bf16::fp4_exponent_scratch(p, k_pad);
  const int64_t groups = p.a_scale ? (k_pad + p.a_group - 1) / p.a_group : 0;
  const bool carried = p.m >= 2 && avx512bf16::fp4_pow2_activation_scales(p, groups, 100, exps);
  prepare_activations(p, a, k_pad, carried ? exps : nullptr);
  return p.a_scale && !carried ? dispatch<true>(p, a, k_pad) : dispatch<false>(p, a, k_pad);
}

}  // namespace

GemvFp4Fn gemv_fp4_kernel_avx512bf16() {
  return gemv_fp4;
}

}  // namespace tessera::cpu
