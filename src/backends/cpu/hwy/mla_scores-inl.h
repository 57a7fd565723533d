// Scores of the Highway MLA set: s[t][c] = k_t . q_c for a tile of fp32 K rows against all query rows.
// Query rows lie along the vector lanes (q packed as [d_qk][mp]) and K elements are broadcast, so K rows
// are read in place and the softmax then works on columns of s with vertical operations only.
// Register tiles: MR tokens x NV vectors of query rows, MR * NV accumulators (24 of the 32 AVX-512
// registers, 12 of the 16 AVX2 ones). K is split into chunks of kScoresChunk so the chunk of the query
// columns a tile streams stays in L1 while the token blocks pass over it.
#if defined(TESSERA_HWY_MLA_SCORES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TESSERA_HWY_MLA_SCORES_INL_H_
#undef TESSERA_HWY_MLA_SCORES_INL_H_
#else
#define TESSERA_HWY_MLA_SCORES_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace tessera::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace {  // included by mla_kernels.cc only: nothing leaves its translation unit

constexpr int kScoresChunk = 128;

// s[t][c0 + ...] (+)= sum over k in [k0, k0 + kc) of rows[t][k] * q[k][c0 + ...] for MR tokens. Not
// inlined: inside attend_tile the MR row pointers and q's pointer lived on the stack, reloaded per k.
template <int MR, int NV>
HWY_NOINLINE void scores_block(const float* const* rows, int k0, int kc, const float* q, int mp, float* s, int lds,
                               bool accumulate) {
  const hn::ScalableTag<float> d;
  const int n = int(hn::Lanes(d));
  const float* a[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) a[r] = rows[r] + k0;
  hn::Vec<decltype(d)> acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? hn::LoadU(d, s + r * lds + v * n) : hn::Zero(d);
  for (int k = 0; k < kc; ++k) {
    hn::Vec<decltype(d)> b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(d, q + int64_t(k) * mp + v * n);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const auto x = hn::Set(d, a[r][k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(x, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], d, s + r * lds + v * n);
}

// Every token block (nt_pad rows, a multiple of MR) of the NV vectors of query rows at column c0.
template <int MR, int NV>
void scores_columns(const float* const* rows, int nt_pad, int k0, int kc, const float* q_packed, int mp, float* s,
                    int c0) {
  const float* q = q_packed + int64_t(k0) * mp + c0;
  for (int t = 0; t < nt_pad; t += MR) scores_block<MR, NV>(rows + t, k0, kc, q, mp, s + t * mp + c0, mp, k0 > 0);
}

// rows: nt_pad pointers (a multiple of 24: padding rows point at zeros); s: [nt_pad][mp].
void mla_scores(const float* const* rows, int nt_pad, const float* q_packed, int mp, int d_qk, float* s) {
  const hn::ScalableTag<float> d;
  const int n = int(hn::Lanes(d));
  const int vectors = mp / n;
  for (int k0 = 0; k0 < d_qk; k0 += kScoresChunk) {
    const int kc = d_qk - k0 < kScoresChunk ? d_qk - k0 : kScoresChunk;
    int v = 0;
    if (hn::MaxLanes(d) >= 16) {  // 32 registers
      for (; vectors - v >= 4; v += 4) scores_columns<6, 4>(rows, nt_pad, k0, kc, q_packed, mp, s, v * n);
      if (vectors - v == 3) scores_columns<8, 3>(rows, nt_pad, k0, kc, q_packed, mp, s, v * n);
      if (vectors - v == 2) scores_columns<8, 2>(rows, nt_pad, k0, kc, q_packed, mp, s, v * n);
    } else {  // 16 registers
      for (; vectors - v >= 2; v += 2) scores_columns<6, 2>(rows, nt_pad, k0, kc, q_packed, mp, s, v * n);
    }
    if (vectors - v == 1) scores_columns<8, 1>(rows, nt_pad, k0, kc, q_packed, mp, s, v * n);
  }
}

}  // namespace
}  // namespace tessera::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
