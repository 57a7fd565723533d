// The running key range of the avx512 select kernels (select_bf16.cc, select_filter.cc): per-lane
// int16 minima / maxima of a scan folded into the caller's int32 min_key / max_key. Header-only but
// private to this folder: the function is static (backends/cpu/README.md, rule 1).
#pragma once

#include <immintrin.h>
#include <stdint.h>

namespace tessera::cpu::avx512 {

static inline void fold_key_range(__m512i mn, __m512i mx, int32_t* min_key, int32_t* max_key) {
  const __m512i mn32 = _mm512_min_epi32(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(mn)),
                                        _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(mn, 1)));
  const __m512i mx32 = _mm512_max_epi32(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(mx)),
                                        _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(mx, 1)));
  const int32_t new_min = _mm512_reduce_min_epi32(mn32), new_max = _mm512_reduce_max_epi32(mx32);
  // The int16 clamp of the caller's bounds (e.g. INT32_MAX / INT32_MIN sentinels) is not a key seen.
  *min_key = *min_key < new_min ? *min_key : new_min;
  *max_key = *max_key > new_max ? *max_key : new_max;
}

}  // namespace tessera::cpu::avx512
