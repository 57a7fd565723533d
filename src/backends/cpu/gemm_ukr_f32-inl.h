// The fp32-FMA GEMM micro-kernel (avx2/, avx512/), written once over the vector width V (a folder's
// traits, f32_vec.h): an M x (L*NV) fp32 tile (L = V::kLanes) in M*NV vector accumulators updated with
// vfmadd231ps (broadcast a-value x b-vector). Per K value: NV loads of the packed b-panel, M broadcasts
// of a-panel values (one per row), M*NV FMAs; the order of every FMA and of the group scaling is fixed
// here, so both widths give the same bits per lane. Internal linkage throughout (README.md,
// "Width templates").
#pragma once

#include <stdint.h>

#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/ukr_prefetch.h"

namespace tessera::cpu {
namespace {

template <class V, int M, int NV, bool kScaled>
void ukr_rows(const UkrArgs& p) {
  constexpr int L = V::kLanes;
  constexpr int kNr = L * NV;
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
    typename V::Vec acc[M][NV];
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = V::zero();

    const float* bp = b + int64_t(k_begin) * kNr;
    const float* lo = a_lo + k_begin;
    const float* hi = a_hi + k_begin;
#pragma GCC unroll 2
    for (int k = k_begin; k < k_end; ++k, bp += kNr, ++lo, ++hi) {
      typename V::Vec bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = V::load(bp + L * v);
#pragma GCC unroll 16
      for (int r = 0; r < M; ++r) {
        const typename V::Vec av = V::set1(r < H ? lo[row_off[r]] : hi[row_off[r - H]]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::fma(av, bv[v], acc[r][v]);
      }
    }

    const bool overwrite = g == 0 && !p.accumulate;
    typename V::Vec col_scale[NV];
    if (kScaled)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) col_scale[v] = V::load(p.col_scale + g * p.col_scale_stride + L * v);
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r) {
      float* c = p.c + r * p.ldc;
      typename V::Vec rs;
      if (kScaled) rs = V::set1(p.row_scale[g * p.row_scale_stride + r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        if (kScaled) {
          const typename V::Vec s = V::mul(rs, col_scale[v]);
          const typename V::Vec prev = overwrite ? V::zero() : V::load(c + L * v);
          V::store(c + L * v, V::fma(acc[r][v], s, prev));
        } else {
          V::store(c + L * v, overwrite ? acc[r][v] : V::add(V::load(c + L * v), acc[r][v]));
        }
      }
    }
  }
}

// Dispatch on the number of valid rows (1..MR) so edge tiles run the same code with fewer rows.
template <class V, int MR, int NV, bool kScaled, int M = MR>
void ukr_dispatch(const UkrArgs& p) {
  if constexpr (M == 1) {
    ukr_rows<V, 1, NV, kScaled>(p);
  } else {
    if (p.m_valid >= M) return ukr_rows<V, M, NV, kScaled>(p);
    ukr_dispatch<V, MR, NV, kScaled, M - 1>(p);
  }
}

// GemmKernelSet's ukr for an MR x (L*NV) tile.
template <class V, int MR, int NV>
void ukr_f32(const UkrArgs& p) {
  if (p.row_scale) {
    ukr_dispatch<V, MR, NV, true>(p);
  } else {
    ukr_dispatch<V, MR, NV, false>(p);
  }
}

}  // namespace
}  // namespace tessera::cpu
