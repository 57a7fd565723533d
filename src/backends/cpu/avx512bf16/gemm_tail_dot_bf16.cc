// The few columns of a b-side tail panel as dot products along K (avx512bf16). When tokens are the
// b-side (MoE groups), a group's last panel often holds 1-8 tokens; the panel micro-kernel computes 16
// of them at a time (at 0.34-0.68 of its full rate for such thin panels). Here both operands are read
// as K-contiguous bf16 rows: one accumulator per (weight row, token) pair collects 32 products per
// vdpbf16ps, and each is summed horizontally once per K chunk. Blocks of 4 rows x 3-4 tokens, 7-8 x 2
// or 8-14 x 1 match the 8- and 14-row panels of the micro-kernels.
#include <immintrin.h>

#include "backends/cpu/avx512bf16/masks.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

using avx512bf16::word_mask;

// Rows [i0, i0 + R) x tokens [t0, t0 + T) of the tail; rows at or beyond p.rows read row i0 (their sums
// are not stored).
template <int R, int T>
void block(const TailDotArgs& p, int i0, int t0) {
  const uint16_t* a[R];
  const uint16_t* b[T];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) a[r] = p.a + int64_t(i0 + r < p.rows ? i0 + r : i0) * p.lda;
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) b[t] = p.b + int64_t(t0 + t) * p.ldb;
  __m512 acc[R][T];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int k = 0; k < p.k_valid; k += 32) {
    const __mmask32 m = word_mask(p.k_valid - k);
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
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) {
    if (i0 + r >= p.rows) break;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      float* c = p.c + int64_t(i0 + r) * p.ldc + t0 + t;
      const float s = _mm512_reduce_add_ps(acc[r][t]);
      *c = p.accumulate ? *c + s : s;
    }
  }
}

template <int R, int T>
void rows_of(const TailDotArgs& p, int t0) {
  for (int i0 = 0; i0 < p.rows; i0 += R) block<R, T>(p, i0, t0);
}

// Row blocks sized to the callers' panels (8 or 14 rows) so no block computes many clamped rows.
void tail_dot(const TailDotArgs& p) {
  int t0 = 0;
  for (; t0 + 4 <= p.cols; t0 += 4) rows_of<4, 4>(p, t0);
  switch (p.cols - t0) {
    case 3: return rows_of<4, 3>(p, t0);
    case 2: return p.rows <= 8 ? rows_of<8, 2>(p, t0) : rows_of<7, 2>(p, t0);
    case 1: return p.rows <= 8 ? rows_of<8, 1>(p, t0) : rows_of<14, 1>(p, t0);
    default: return;
  }
}

}  // namespace

TailDotFn gemm_tail_dot_avx512bf16() { return tail_dot; }

}  // namespace tessera::cpu
