// The few columns of a b-side tail panel as dot products along K (avx512bf16). When tokens are the
// b-side (MoE groups), a group's last panel often holds 1-8 tokens; the panel micro-kernel computes 16
// of them at a time (at 0.34-0.68 of its full rate for such thin panels). Here both operands are read
// as K-contiguous bf16 rows: one accumulator per (weight row, token) pair collects 32 products per
// vdpbf16ps, and each is summed horizontally once per K chunk (scaled: each K group's sums are scaled
// into a running total first).
#include <immintrin.h>

#include "backends/cpu/avx512bf16/masks.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

using avx512bf16::word_mask;

// Rows [i0, i0 + R) x tokens [t0, t0 + T) of the tail; rows at or beyond p.rows read row i0 (their sums
// are not stored). Scaled: each K group's vector sums are scaled into a running vector total (one FMA
// per pair and group), summed horizontally once at the end.
template <int R, int T, bool kScaled>
void block(const TailDotArgs& p, int i0, int t0) {
  const uint16_t* a[R];
  const uint16_t* b[T];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) a[r] = p.a + int64_t(i0 + r < p.rows ? i0 + r : i0) * p.lda;
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) b[t] = p.b + int64_t(t0 + t) * p.ldb;
  // Unscaled: one group, summed straight into tot (no second set of registers).
  __m512 tot[R][T];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) tot[r][t] = _mm512_setzero_ps();
  const int group = kScaled ? p.group : p.k_valid;
  for (int g0 = 0, g = 0; g0 < p.k_valid; g0 += group, ++g) {
    const int g1 = g0 + group < p.k_valid ? g0 + group : p.k_valid;
    __m512 scaled_acc[kScaled ? R : 1][kScaled ? T : 1];
    auto& acc = [&]() -> auto& {
      if constexpr (kScaled)
        return scaled_acc;
      else
        return tot;
    }
    ();
    if constexpr (kScaled) {
#pragma GCC unroll 14
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    for (int k = g0; k < g1; k += 32) {
      const __mmask32 m = word_mask(g1 - k);
      __m512bh bv[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) bv[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, b[t] + k);
#pragma GCC unroll 14
      for (int r = 0; r < R; ++r) {
        const __m512bh av = (__m512bh)_mm512_maskz_loadu_epi16(m, a[r] + k);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], av, bv[t]);
      }
    }
    if constexpr (kScaled) {
#pragma GCC unroll 14
      for (int r = 0; r < R; ++r) {
        const float rs = p.row_scale[g * p.row_scale_stride + (i0 + r < p.rows ? i0 + r : i0)];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
          tot[r][t] =
              _mm512_fmadd_ps(acc[r][t], _mm512_set1_ps(rs * p.col_scale[g * p.col_scale_stride + t0 + t]), tot[r][t]);
      }
    }
  }
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) {
    if (i0 + r >= p.rows) break;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      float* c = p.c + int64_t(i0 + r) * p.ldc + t0 + t;
      const float s = _mm512_reduce_add_ps(tot[r][t]);
      *c = p.accumulate ? *c + s : s;
    }
  }
}

template <int R, int T, bool kScaled>
void rows_of(const TailDotArgs& p, int t0) {
  for (int i0 = 0; i0 < p.rows; i0 += R) block<R, T, kScaled>(p, i0, t0);
}

// Row blocks sized to the callers' panels (8 or 14 rows) so no block computes many clamped rows;
// scaled blocks hold a second set of accumulators (per group and running total), so they are smaller.
template <bool kScaled>
void tail_dot_as(const TailDotArgs& p) {
  constexpr int kR4 = kScaled ? 2 : 4, kR3 = kScaled ? 3 : 4;
  int t0 = 0;
  for (; t0 + 4 <= p.cols; t0 += 4) rows_of<kR4, 4, kScaled>(p, t0);
  switch (p.cols - t0) {
    case 3:
      return rows_of<kR3, 3, kScaled>(p, t0);
    case 2:
      return p.rows <= 8 ? rows_of < kScaled ? 4 : 8, 2, kScaled > (p, t0) : rows_of<7, 2, kScaled>(p, t0);
    case 1:
      return p.rows <= 8 ? rows_of<8, 1, kScaled>(p, t0) : rows_of < kScaled ? 7 : 14, 1, kScaled > (p, t0);
    default:
      return;
  }
}

void tail_dot(const TailDotArgs& p) {
  if (p.row_scale) {
    tail_dot_as<true>(p);
  } else {
    tail_dot_as<false>(p);
  }
}

}  // namespace

TailDotFn gemm_tail_dot_avx512bf16() {
  return tail_dot;
}

}  // namespace tessera::cpu
