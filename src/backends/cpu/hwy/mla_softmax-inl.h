// Online-softmax step of the Highway MLA set over a tile of scores s[t][c] (query rows c along the lanes,
// so every statistic is a vertical operation on a vector of rows):
//   x = scale * s (or -inf where t >= visible[c]), m' = max(m, max_t x), alpha = exp(m - m'),
//   p = exp(x - m'), sum' = sum * alpha + sum_t p; p stays fp32 and overwrites s.
// A row whose scores are all -inf so far keeps m = -inf and gets p = 0 (it subtracts 0 instead of m').
#if defined(TESSERA_HWY_MLA_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_MLA_SOFTMAX_INL_H_
#undef TESSERA_HWY_MLA_SOFTMAX_INL_H_
#else
#define TESSERA_HWY_MLA_SOFTMAX_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {  // included by mla_kernels.cc only: nothing leaves its translation unit

// exp(x) for x <= 0 with ~1 ulp error: x = n*ln2 + r, |r| <= ln2/2, degree-6 Taylor polynomial in r,
// times 2^n built in the exponent field. Below -126*ln2 (where 2^n would be subnormal) the result is 0,
// so -inf gives exactly 0; NaN stays NaN.
template <class D>
hn::Vec<D> exp_nonpositive(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto lowest = hn::Set(d, -87.33f);
  const auto underflow = hn::Lt(x, lowest);
  x = hn::Max(lowest, x);  // x86 max returns its second operand when one is NaN: NaN passes through
  const auto n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  auto r = hn::NegMulAdd(n, hn::Set(d, 0.693145751953125f), x);
  r = hn::NegMulAdd(n, hn::Set(d, 1.428606765330187e-06f), r);
  auto p = hn::Set(d, 1.0f / 720);
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 120));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 24));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 6));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  const auto two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127))));
  return hn::IfThenZeroElse(underflow, hn::Mul(p, two_n));
}

// Per-row statistics of one tile, padded to mp rows (rows >= m are never stored back).
struct SoftmaxRows {
  float* row_max;      // [mp]: in: m, out: m'
  float* row_sum;      // [mp]
  float* alpha;        // [mp]: out
  const int* visible;  // [mp]
};

void mla_softmax(float* s, int nt, int mp, float scale, const SoftmaxRows& rows) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int n = int(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, -__builtin_inff());
  const auto vscale = hn::Set(d, scale);
  for (int c = 0; c < mp; c += n) {
    const auto vis = hn::LoadU(di, rows.visible + c);
    auto mx = neg_inf;
    for (int t = 0; t < nt; ++t) {
      float* st = s + int64_t(t) * mp + c;
      const auto seen = hn::RebindMask(d, hn::Lt(hn::Set(di, t), vis));
      const auto x = hn::IfThenElse(seen, hn::Mul(hn::LoadU(d, st), vscale), neg_inf);
      hn::StoreU(x, d, st);
      mx = hn::Max(mx, x);
    }
    const auto m_old = hn::LoadU(d, rows.row_max + c);
    const auto m_new = hn::Max(m_old, mx);
    const auto m_use = hn::IfThenZeroElse(hn::Eq(m_new, neg_inf), m_new);
    const auto alpha = exp_nonpositive(d, hn::Sub(m_old, m_use));
    auto sum = hn::Mul(hn::LoadU(d, rows.row_sum + c), alpha);
    for (int t = 0; t < nt; ++t) {
      float* st = s + int64_t(t) * mp + c;
      const auto p = exp_nonpositive(d, hn::Sub(hn::LoadU(d, st), m_use));
      hn::StoreU(p, d, st);
      sum = hn::Add(sum, p);
    }
    hn::StoreU(m_new, d, rows.row_max + c);
    hn::StoreU(sum, d, rows.row_sum + c);
    hn::StoreU(alpha, d, rows.alpha + c);
  }
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
