// The column order of o in the avx512bf16 MLA set (and the AMX set, whose V pairs are packed the same
// way): within each group of 32 columns, natural column n sits at 4*(n/8) + n%8 for n%8 < 4, else at
// 16 + 4*(n/8) + n%8 - 4 (the in-lane word unpack of two token rows). Private to the MLA kernel files;
// static, so no copy escapes the ISA flags.
#pragma once

#include <immintrin.h>

namespace tessera::cpu::avx512bf16 {

// lo, hi: one row's 32 columns of a group in the set's order -> dst[0..31] in natural order.
static inline void store_o_group_natural(__m512 lo, __m512 hi, float* dst) {
  const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i second = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  _mm512_storeu_ps(dst, _mm512_permutex2var_ps(lo, first, hi));
  _mm512_storeu_ps(dst + 16, _mm512_permutex2var_ps(lo, second, hi));
}

}  // namespace tessera::cpu::avx512bf16
