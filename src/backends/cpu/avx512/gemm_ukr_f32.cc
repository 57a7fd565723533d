// The avx512 GEMM micro-kernels: an M x (16*NV) fp32 tile in zmm accumulators updated with
// vfmadd231ps (broadcast a-value x b-vector). Two tiles are offered, the same shapes as the avx512bf16
// set: 8 x 48 (24 accumulators) and 14 x 32 (28 accumulators); the plan picks the one that pads least.
//
// Per K value: NV zmm loads of the packed b-panel, M broadcasts of a-panel values (one per row), M*NV
// FMAs. Two FMA pipes with 4-cycle latency need >= 8 independent chains; 24-28 leave room for the loads.
// Measured on Zen 5 (1 thread, peak 276 GFLOP/s): 8x48 and 14x32 ~271 GFLOP/s with panels in L1, 259-268
// over a 256 x 512 block with kc = 256 (unscaled), 253-261 with fp32 scales every 128 K.
#include <immintrin.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/ukr_prefetch.h"

namespace tessera::cpu {
namespace {

template <int M, int NV, bool kScaled>
void ukr_rows(const UkrArgs& p) {
  constexpr int kNr = 16 * NV;
  // Rows are read as two halves through one set of H row offsets (base + offset addressing): with one
  // pointer per row, 14 rows exhaust the general registers and the K loop reloads offsets from the stack.
  constexpr int H = (M + 1) / 2;
  int64_t row_off[H];
#pragma GCC unroll 8
  for (int r = 0; r < H; ++r) row_off[r] = r * p.lda;
  const float* a_lo = static_cast<const float*>(p.a);
  const float* a_hi = a_lo + (M > H ? H * p.lda : 0);
  const float* b = static_cast<const float*>(p.b);
  const int groups = (p.kc + p.group - 1) / p.group;

  // The caller's next lines (UkrArgs::pf_*), issued per group here: the K loop has no registers to spare.
  UkrPrefetcher prefetch(p);

  for (int g = 0; g < groups; ++g) {
    const int k_begin = g * p.group;
    const int k_end = k_begin + p.group < p.kc ? k_begin + p.group : p.kc;
    if (prefetch.per_step) prefetch.run(p, prefetch.per_step * ((k_end - k_begin + 31) / 32));
    __m512 acc[M][NV];
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();

    const float* bp = b + int64_t(k_begin) * kNr;
    const float* lo = a_lo + k_begin;
    const float* hi = a_hi + k_begin;
#pragma GCC unroll 2
    for (int k = k_begin; k < k_end; ++k, bp += kNr, ++lo, ++hi) {
      __m512 bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(bp + 16 * v);
#pragma GCC unroll 16
      for (int r = 0; r < M; ++r) {
        const __m512 av = _mm512_set1_ps(r < H ? lo[row_off[r]] : hi[row_off[r - H]]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }

    const bool overwrite = g == 0 && !p.accumulate;
    __m512 col_scale[NV];
    if (kScaled)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) col_scale[v] = _mm512_loadu_ps(p.col_scale + g * p.col_scale_stride + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      float* c = p.c + r * p.ldc;
      __m512 rs;
      if (kScaled) rs = _mm512_set1_ps(p.row_scale[g * p.row_scale_stride + r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        if (kScaled) {
          const __m512 s = _mm512_mul_ps(rs, col_scale[v]);
          const __m512 prev = overwrite ? _mm512_setzero_ps() : _mm512_loadu_ps(c + 16 * v);
          _mm512_storeu_ps(c + 16 * v, _mm512_fmadd_ps(acc[r][v], s, prev));
        } else {
          _mm512_storeu_ps(c + 16 * v, overwrite ? acc[r][v] : _mm512_add_ps(_mm512_loadu_ps(c + 16 * v), acc[r][v]));
        }
      }
    }
  }
}

// Dispatch on the number of valid rows (1..MR) so edge tiles run the same code with fewer rows.
template <int MR, int NV, bool kScaled, int M = MR>
void ukr_dispatch(const UkrArgs& p) {
  if constexpr (M == 1) {
    ukr_rows<1, NV, kScaled>(p);
  } else {
    if (p.m_valid >= M) return ukr_rows<M, NV, kScaled>(p);
    ukr_dispatch<MR, NV, kScaled, M - 1>(p);
  }
}

template <int MR, int NV>
void ukr(const UkrArgs& p) {
  if (p.row_scale) {
    ukr_dispatch<MR, NV, true>(p);
  } else {
    ukr_dispatch<MR, NV, false>(p);
  }
}

}  // namespace

void gemm_ukr_avx512_8x48(const UkrArgs& p) {
  ukr<8, 3>(p);
}
void gemm_ukr_avx512_14x32(const UkrArgs& p) {
  ukr<14, 2>(p);
}

}  // namespace tessera::cpu
