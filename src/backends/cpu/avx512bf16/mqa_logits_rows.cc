// The MQA-logits kernel: one query (all its heads) against a block of key rows, with vdpbf16ps.
// Heads run along the zmm lanes (16 per vector) and key rows along the register block, so the query
// panel is loaded as whole vectors and each key row contributes one dword broadcast per pair of D:
// no transposition of K is ever needed, and K rows can come straight from an FP8 cache converted in
// place. Block shapes keep <= 24 accumulators live (NV head vectors x R rows): H=64 -> 4 x 6, which
// per pair of D issues 4 vector loads, 6 broadcasts and 24 vdpbf16ps, close to the vdpbf16ps peak in L1
// (keeping the query vectors in registers instead of the broadcasts was much slower). The epilogue
// scales by the token's fp32 scale, applies relu, multiplies by the head weights and sums heads in a fixed order
// (vector by vector, then lanes), so a row's result does not depend on which block computed it.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/mqa_logits_kernels.h"

namespace tessera::cpu {
namespace {

// Rows per block for NV head vectors: NV * R <= 24 accumulators, plus the operands held in registers
// (NV <= 2: the NV query vectors; otherwise the R broadcasts) within the 32 zmm registers.
constexpr int rows_for(int nv) {
  return nv <= 2 ? 24 / nv : nv == 3 ? 7 : nv == 4 ? 6 : nv <= 6 ? 4 : 3;
}

inline __m512bh broadcast_pair(const uint16_t* row, int p) {
  int32_t pair;
  memcpy(&pair, row + 2 * p, 4);
  return (__m512bh)_mm512_set1_epi32(pair);
}

template <int NV>
void rows_block(const MqaRowsArgs& a, int r0, int nrows) {
  constexpr int R = rows_for(NV);
  const uint16_t* krow[R];
#pragma GCC unroll 24
  for (int r = 0; r < R; ++r)
    krow[r] = static_cast<const uint16_t*>(a.k) + (r0 + (r < nrows ? r : nrows - 1)) * a.k_stride;
  __m512 acc[R][NV];
#pragma GCC unroll 24
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();

  const uint16_t* qp = static_cast<const uint16_t*>(a.q_panel);
  const int pairs = a.dim / 2;
  for (int p = 0; p < pairs; ++p, qp += 32 * NV) {
    if constexpr (NV <= 2) {  // query vectors stay in registers, one broadcast register at a time
      __m512bh qv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) qv[v] = (__m512bh)_mm512_loadu_si512(qp + 32 * v);
#pragma GCC unroll 24
      for (int r = 0; r < R; ++r) {
        const __m512bh kb = broadcast_pair(krow[r], p);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], qv[v], kb);
      }
    } else {  // many heads: the broadcasts stay in registers, query vectors stream
      __m512bh kb[R];
#pragma GCC unroll 24
      for (int r = 0; r < R; ++r) kb[r] = broadcast_pair(krow[r], p);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        const __m512bh qv = (__m512bh)_mm512_loadu_si512(qp + 32 * v);
#pragma GCC unroll 24
        for (int r = 0; r < R; ++r) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], qv, kb[r]);
      }
    }
  }

  const __m512 zero = _mm512_setzero_ps();
  const int last_lanes = a.heads - 16 * (NV - 1);
  const __mmask16 last_mask = last_lanes >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << last_lanes) - 1);
#pragma GCC unroll 24
  for (int r = 0; r < R; ++r) {
    if (r >= nrows) break;
    const __m512 s = _mm512_set1_ps(a.k_scale[r0 + r]);
    __m512 sum = zero;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v == NV - 1 ? last_mask : __mmask16(0xFFFF);
      const __m512 x = _mm512_max_ps(zero, _mm512_maskz_mul_ps(m, acc[r][v], s));  // relu; NaN passes
      sum = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, a.weights + 16 * v), sum);
    }
    a.out[r0 + r] = _mm512_reduce_add_ps(sum);
  }
}

template <int NV>
void rows_all(const MqaRowsArgs& a) {
  constexpr int R = rows_for(NV);
  for (int r0 = 0; r0 < a.rows; r0 += R) rows_block<NV>(a, r0, a.rows - r0 < R ? a.rows - r0 : R);
}

void rows(const MqaRowsArgs& a) {
  switch (a.head_vectors) {
    case 1:
      return rows_all<1>(a);
    case 2:
      return rows_all<2>(a);
    case 3:
      return rows_all<3>(a);
    case 4:
      return rows_all<4>(a);
    case 5:
      return rows_all<5>(a);
    case 6:
      return rows_all<6>(a);
    case 7:
      return rows_all<7>(a);
    default:
      return rows_all<8>(a);
  }
}

void e4m3_to_bf16(const uint8_t* src, int64_t n, uint16_t* dst) {
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i lo, hi;
    avx512bf16::e4m3x64_to_bf16(t, _mm512_loadu_si512(src + i), &lo, &hi);
    _mm512_storeu_si512(dst + i, lo);
    _mm512_storeu_si512(dst + i + 32, hi);
  }
  if (i < n) {
    const int64_t left = n - i;
    __m512i lo, hi;
    avx512bf16::e4m3x64_to_bf16(t, _mm512_maskz_loadu_epi8(_cvtu64_mask64((~0ull) >> (64 - left)), src + i), &lo, &hi);
    const __mmask32 m_lo = left >= 32 ? ~__mmask32(0) : __mmask32((1u << left) - 1);
    const __mmask32 m_hi = left > 32 ? __mmask32((1ull << (left - 32)) - 1) : 0;
    _mm512_mask_storeu_epi16(dst + i, m_lo, lo);
    _mm512_mask_storeu_epi16(dst + i + 32, m_hi, hi);
  }
}

void e4m3_keys(const uint8_t* src, int64_t n, void* dst) {
  e4m3_to_bf16(src, n, static_cast<uint16_t*>(dst));
}

// Panels and panel size are the scalar set's (plain C, defined in scalar/mqa_logits.cc).
const MqaLogitsKernels kSet = {"mqa_avx512bf16", 2,         mqa_panel_bytes_bf16,   mqa_pack_query_bf16,
                               e4m3_to_bf16,     e4m3_keys, mqa_mx_keys_avx512bf16, rows};

}  // namespace

const MqaLogitsKernels* mqa_kernels_avx512bf16() {
  return &kSet;
}

}  // namespace tessera::cpu
