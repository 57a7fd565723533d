// Online-softmax step of the avx512bf16 MLA set over a tile of scores s[t][c] (query rows c along the
// lanes, so every statistic is a vertical operation on 16 rows at once):
//   x = scale * s (or -inf where t >= visible[c]), m' = max(m, max_t x), alpha = exp(m - m'),
//   p = exp(x - m'), sum' = sum * alpha + sum_t p, and p rounded to bf16 as token pairs for p.v.
// A row whose scores are all -inf so far keeps m = -inf and gets p = 0 (it subtracts 0 instead of m').
#include <immintrin.h>

#include "backends/cpu/mla_kernel_set.h"

namespace tessera::cpu {
namespace {

// exp(x) for x <= 0 with ~1 ulp error: x = n*ln2 + r, |r| <= ln2/2, degree-6 Taylor polynomial in r,
// scaled by 2^n with vscalefps. Inputs below -104 give 0 (or a denormal that bf16 flushes); NaN stays NaN.
inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // NaN in x is returned as is (second operand)
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

inline __mmask16 row_mask(int valid) {
  if (valid >= 16) return 0xFFFF;
  return valid <= 0 ? 0 : __mmask16((1u << valid) - 1);
}

}  // namespace

void mla_softmax_avx512bf16(float* s, int nt, int m, int mp, float scale, const int* visible, float* row_max,
                            float* row_sum, float* alpha_out, uint16_t* p_pairs) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512 vscale = _mm512_set1_ps(scale);
  // (p0[i], p1[i]) pairs from the bf16 vector [p0 lanes 0..15 | p1 lanes 0..15].
  const __m512i zip = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int c = 0; c < mp; c += 16) {
    const __mmask16 valid = row_mask(m - c);
    const __m512i vis = visible ? _mm512_maskz_loadu_epi32(valid, visible + c) : _mm512_maskz_set1_epi32(valid, nt);
    __m512 mx = neg_inf;
    for (int t = 0; t < nt; ++t) {
      float* st = s + t * mp + c;
      const __mmask16 seen = _mm512_cmpgt_epi32_mask(vis, _mm512_set1_epi32(t));
      const __m512 x = _mm512_mask_mul_ps(neg_inf, seen, _mm512_loadu_ps(st), vscale);
      _mm512_storeu_ps(st, x);
      mx = _mm512_max_ps(mx, x);
    }
    const __m512 m_old = _mm512_mask_loadu_ps(neg_inf, valid, row_max + c);
    const __m512 m_new = _mm512_max_ps(m_old, mx);
    const __m512 m_use =
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m_new, neg_inf, _CMP_EQ_OQ), m_new, _mm512_setzero_ps());
    const __m512 alpha = exp_nonpositive(_mm512_sub_ps(m_old, m_use));
    __m512 sum = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, row_sum + c), alpha);
    for (int t = 0; t < nt; t += 2) {
      const __m512 p0 = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + t * mp + c), m_use));
      __m512 p1 = _mm512_setzero_ps();
      if (t + 1 < nt) p1 = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + (t + 1) * mp + c), m_use));
      sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
      const __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(p1, p0);
      _mm512_storeu_si512(p_pairs + (int64_t(t / 2) * mp + c) * 2, _mm512_permutexvar_epi16(zip, halves));
    }
    _mm512_mask_storeu_ps(row_max + c, valid, m_new);
    _mm512_mask_storeu_ps(row_sum + c, valid, sum);
    _mm512_storeu_ps(alpha_out + c, alpha);
  }
}

}  // namespace tessera::cpu
