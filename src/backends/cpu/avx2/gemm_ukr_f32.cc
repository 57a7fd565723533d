// The avx2 GEMM micro-kernel: a 6 x 16 fp32 tile (12 ymm accumulators) updated with vfmadd231ps
// (broadcast a-value x b-vector).
//
// Per K value: 2 ymm loads of the packed b-panel (16 columns), 6 broadcasts of a-panel values (one per
// row), 12 FMAs. 12 accumulators + 2 b vectors + 1 broadcast use 15 of the 16 ymm registers, and 12
// independent chains cover two FMA pipes with 4-cycle latency.
// Measured on Zen 5 (1 thread, ymm peak 139 GFLOP/s): ~137 GFLOP/s with panels in L1 or over a 256 x 512 block.
#include <immintrin.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/ukr_prefetch.h"

namespace tessera::cpu {
namespace {

template <int M, int NV, bool kScaled>
void ukr_rows(const UkrArgs& p) {
  constexpr int kNr = 8 * NV;
  const float* a_rows[M];
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) a_rows[r] = static_cast<const float*>(p.a) + r * p.lda;
  const float* b = static_cast<const float*>(p.b);
  const int groups = (p.kc + p.group - 1) / p.group;

  // The caller's next lines (UkrArgs::pf_*), issued per group here: the K loop has no registers to spare.
  UkrPrefetcher prefetch(p);

  for (int g = 0; g < groups; ++g) {
    const int k_begin = g * p.group;
    const int k_end = k_begin + p.group < p.kc ? k_begin + p.group : p.kc;
    if (prefetch.per_step) prefetch.run(p, prefetch.per_step * ((k_end - k_begin + 31) / 32));
    __m256 acc[M][NV];
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();

    const float* bp = b + int64_t(k_begin) * kNr;
#pragma GCC unroll 2
    for (int k = k_begin; k < k_end; ++k, bp += kNr) {
      __m256 bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(bp + 8 * v);
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) {
        const __m256 av = _mm256_broadcast_ss(a_rows[r] + k);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }

    const bool overwrite = g == 0 && !p.accumulate;
    __m256 col_scale[NV];
    if (kScaled)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) col_scale[v] = _mm256_loadu_ps(p.col_scale + g * p.col_scale_stride + 8 * v);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      float* c = p.c + r * p.ldc;
      __m256 rs;
      if (kScaled) rs = _mm256_set1_ps(p.row_scale[g * p.row_scale_stride + r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        if (kScaled) {
          const __m256 s = _mm256_mul_ps(rs, col_scale[v]);
          const __m256 prev = overwrite ? _mm256_setzero_ps() : _mm256_loadu_ps(c + 8 * v);
          _mm256_storeu_ps(c + 8 * v, _mm256_fmadd_ps(acc[r][v], s, prev));
        } else {
          _mm256_storeu_ps(c + 8 * v, overwrite ? acc[r][v] : _mm256_add_ps(_mm256_loadu_ps(c + 8 * v), acc[r][v]));
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

void gemm_ukr_avx2_6x16(const UkrArgs& p) {
  ukr<6, 2>(p);
}

}  // namespace tessera::cpu
