// MLA scores for the avx512bf16 set: s[t][c] = k_t . q_c for a tile of tokens against all query rows.
// The token rows are the broadcast operand (one dword = one bf16 K-pair per row and step) and the packed
// queries [d/2][mp][2] the vector operand, so K rows are read in place (straight from a bf16 cache) and
// the result has query rows along the vector lanes - the softmax then works column-wise without shuffles.
// Register tiles keep 24 accumulators where possible (NV=4 vectors x 6 tokens, 3 x 8, 2 x 12); a lone
// last vector uses 1 x 12 (x86-64 has 16 general registers for the row pointers).
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/mla_kernel_set.h"

namespace tessera::cpu {
namespace {

template <int MR, int NV>
void scores_block(const void* const* rows, const uint16_t* q, int64_t q_step, int kpairs, float* s, int lds) {
  const char* a[MR];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r) a[r] = static_cast<const char*>(rows[r]);
  __m512 acc[MR][NV];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int kp = 0; kp < kpairs; ++kp) {
    __m512bh b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(q + kp * q_step + 32 * v);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      memcpy(&pair, a[r] + 4 * kp, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, b[v]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(s + r * lds + 16 * v, acc[r][v]);
}

// All token blocks of one column block (NV vectors of query rows starting at column c0).
template <int MR, int NV>
void scores_columns(const void* const* k_rows, int nt, const uint16_t* q_packed, int mp, int d_qk, float* s, int lds,
                    int c0) {
  const int64_t q_step = int64_t(mp) * 2;
  for (int t = 0; t < nt; t += MR)
    scores_block<MR, NV>(k_rows + t, q_packed + c0 * 2, q_step, d_qk / 2, s + t * lds + c0, lds);
}

}  // namespace

// k_rows must hold round_up(nt, 24) pointers (the caller pads with a zero row) and s that many rows.
void mla_scores_avx512bf16(const void* const* k_rows, int nt, const void* q_packed, int mp, int d_qk, float* s,
                           int lds) {
  const uint16_t* q = static_cast<const uint16_t*>(q_packed);
  int c0 = 0;
  for (; mp - c0 >= 64; c0 += 64) scores_columns<6, 4>(k_rows, nt, q, mp, d_qk, s, lds, c0);
  switch ((mp - c0) / 16) {
    case 3:
      scores_columns<8, 3>(k_rows, nt, q, mp, d_qk, s, lds, c0);
      break;
    case 2:
      scores_columns<12, 2>(k_rows, nt, q, mp, d_qk, s, lds, c0);
      break;
    case 1:
      scores_columns<12, 1>(k_rows, nt, q, mp, d_qk, s, lds, c0);
      break;
    default:
      break;
  }
}

}  // namespace tessera::cpu
