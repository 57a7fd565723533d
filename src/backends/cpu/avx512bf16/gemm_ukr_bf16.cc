// The avx512bf16 GEMM micro-kernels: an M x (16*NV) fp32 tile in zmm accumulators updated with
// vdpbf16ps. Two tiles are offered: 8 x 48 (24 accumulators) and 14 x 32 (28 accumulators); the plan
// picks the one whose padding wastes least (8 rows divide the M of DeepSeek's shapes, 48 columns divide
// 576/2112/24576; 32 columns divide every M that is a multiple of 32, 14 rows divide 7168).
//
// Per K pair: NV zmm loads of the packed b-panel, M dword broadcasts of a-panel pairs (one per row),
// M*NV vdpbf16ps. >= 24 independent accumulators cover the instruction's latency.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include <immintrin.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/gemm_kernel_set.h"
#include "backends/cpu/ukr_prefetch.h"

namespace tessera::cpu {
namespace {

// The next a-panel's e4m3 -> bf16 conversion (UkrArgs::cv_*), a few 64-value units per 32 K values:
// its byte shuffles then issue beside the vdpbf16ps stream instead of as a pass of their own between
// panels (isolated on Zen 4: 8 vpermt2b beside 32 vdpbf16ps in 16 chains cost ~0.1 of 10 cycles).
struct FusedConvert {
  int per_step = 0;           // units per step of 32 K values; 0: no job
  int left = 0;               // units not yet converted
  const char* src = nullptr;  // next unit's source and destination
  uint16_t* dst = nullptr;
  int unit_in_row = 0;

  explicit FusedConvert(const UkrArgs& p) {
    if (p.cv_end <= p.cv_begin) return;
    const int steps = (p.kc + 31) / 32;
    left = p.cv_end - p.cv_begin;
    per_step = (left + steps - 1) / steps;
    const int row = p.cv_begin / p.cv_row_units;
    unit_in_row = p.cv_begin - row * p.cv_row_units;
    src = p.cv_src + row * p.cv_src_stride + unit_in_row * 64;
    dst = p.cv_dst + row * p.cv_dst_stride + unit_in_row * 64;
  }

  __attribute__((always_inline)) void run(const UkrArgs& p, int count) {
    const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
    for (int i = 0; i < count && left > 0; ++i, --left) {
      __m512i lo, hi;
      avx512bf16::e4m3x64_to_bf16_lanes(t, _mm512_loadu_si512(src), &lo, &hi);
      _mm512_storeu_si512(dst, lo);
      _mm512_storeu_si512(dst + 32, hi);
      if (++unit_in_row < p.cv_row_units) {
        src += 64, dst += 64;
      } else {  // first unit of the next row
        unit_in_row = 0;
        src += p.cv_src_stride - (p.cv_row_units - 1) * 64;
        dst += p.cv_dst_stride - (p.cv_row_units - 1) * 64;
      }
    }
  }
};

// NV vectors of an NS-vector packed panel are computed (NV < NS: the panel's valid columns end early).
template <int M, int NV, bool kScaled, int NS = NV>
void ukr_rows(const UkrArgs& p) {
  const char* a_rows[M];
#pragma GCC unroll 16
  for (int r = 0; r < M; ++r) a_rows[r] = static_cast<const char*>(p.a) + r * p.lda * 2;
  const __m512bh* b = static_cast<const __m512bh*>(p.b);
  const int groups = (p.kc + p.group - 1) / p.group;

  UkrPrefetcher prefetch(p);  // the caller's next lines, spread over the K loop
  FusedConvert convert(p);

  for (int g = 0; g < groups; ++g) {
    const int k_begin = g * p.group;
    const int k_end = k_begin + p.group < p.kc ? k_begin + p.group : p.kc;
    __m512 acc[M][NV];
#pragma GCC unroll 16
    for (int r = 0; r < M; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();

    // One K pair into every accumulator.
    auto step = [&](int kp, const __m512bh* bp) __attribute__((always_inline)) {
      __m512bh bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = bp[v];
#pragma GCC unroll 16
      for (int r = 0; r < M; ++r) {
        int32_t pair;
        __builtin_memcpy(&pair, a_rows[r] + kp * 4, 4);
        const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
      }
    };
    // Blocks of 8 pairs (a group starts at a multiple of 64 pairs), each opening with the prefetch
    // (kp % 16 == 0) or the conversion (kp % 16 == 8) work the old per-pair checks scheduled there:
    // the checks ran once per 8 pairs instead of per pair, and each row's a-panel address, which the
    // 8- and 14-row tiles keep on the stack, is loaded once per block.
    const __m512bh* bp = b + (k_begin / 2) * NS;
    int kp = k_begin / 2;
    for (; kp + 8 <= k_end / 2; kp += 8, bp += 8 * NS) {
      if (kp % 16 == 0) {
        if (prefetch.per_step) prefetch.run(p, prefetch.per_step);
      } else if (convert.per_step) {
        convert.run(p, convert.per_step);
      }
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) step(kp + i, bp + i * NS);
    }
    for (; kp < k_end / 2; ++kp, bp += NS) {
      if (prefetch.per_step && kp % 16 == 0) prefetch.run(p, prefetch.per_step);
      if (convert.per_step && kp % 16 == 8) convert.run(p, convert.per_step);
      step(kp, bp);
    }

    const bool overwrite = g == 0 && !p.accumulate;
    if (kScaled) {
      __m512 col_scale[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) col_scale[v] = _mm512_loadu_ps(p.col_scale + g * p.col_scale_stride + 16 * v);
      // Block-scaled weights give every row of a panel the same scale (128-row blocks): then the
      // products rs * cs are computed once per column vector instead of once per row (same bits).
      const float* rsp = p.row_scale + g * p.row_scale_stride;
      bool uniform = true;
#pragma GCC unroll 16
      for (int r = 1; r < M; ++r) uniform &= rsp[r] == rsp[0];
      if (uniform) {
        __m512 s[NV];
        const __m512 rs = _mm512_set1_ps(rsp[0]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) s[v] = _mm512_mul_ps(rs, col_scale[v]);
#pragma GCC unroll 16
        for (int r = 0; r < M; ++r) {
          float* c = p.c + r * p.ldc;
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) {
            const __m512 prev = overwrite ? _mm512_setzero_ps() : _mm512_loadu_ps(c + 16 * v);
            _mm512_storeu_ps(c + 16 * v, _mm512_fmadd_ps(acc[r][v], s[v], prev));
          }
        }
      } else {
#pragma GCC unroll 16
        for (int r = 0; r < M; ++r) {
          float* c = p.c + r * p.ldc;
          const __m512 rs = _mm512_set1_ps(rsp[r]);
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) {
            const __m512 prev = overwrite ? _mm512_setzero_ps() : _mm512_loadu_ps(c + 16 * v);
            _mm512_storeu_ps(c + 16 * v, _mm512_fmadd_ps(acc[r][v], _mm512_mul_ps(rs, col_scale[v]), prev));
          }
        }
      }
    } else {
#pragma GCC unroll 16
      for (int r = 0; r < M; ++r) {
        float* c = p.c + r * p.ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
          _mm512_storeu_ps(c + 16 * v, overwrite ? acc[r][v] : _mm512_add_ps(_mm512_loadu_ps(c + 16 * v), acc[r][v]));
      }
    }
  }
  if (convert.left > 0) convert.run(p, convert.left);  // whatever the K loop's steps left
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

// Full-height panels whose valid columns end before the last vector (the token tail of a swapped,
// M-grouped problem: up to 47 of 48 columns otherwise computed for nothing) skip the empty vectors.
template <int MR, int NV, bool kScaled, int NU = NV - 1>
bool ukr_narrow(const UkrArgs& p) {
  if constexpr (NU == 0) {
    return false;
  } else {
    if (ukr_narrow<MR, NV, kScaled, NU - 1>(p)) return true;
    if (p.n_valid > 16 * NU) return false;
    ukr_rows<MR, NU, kScaled, NV>(p);
    return true;
  }
}

template <int MR, int NV>
void ukr(const UkrArgs& p) {
  if (p.n_valid > 0 && p.n_valid <= 16 * (NV - 1) && p.m_valid >= MR) {
    if (p.row_scale ? ukr_narrow<MR, NV, true>(p) : ukr_narrow<MR, NV, false>(p)) return;
  }
  if (p.row_scale) {
    ukr_dispatch<MR, NV, true>(p);
  } else {
    ukr_dispatch<MR, NV, false>(p);
  }
}

}  // namespace

void gemm_ukr_avx512bf16_8x48(const UkrArgs& p) {
  ukr<8, 3>(p);
}
void gemm_ukr_avx512bf16_14x32(const UkrArgs& p) {
  ukr<14, 2>(p);
}

}  // namespace tessera::cpu
