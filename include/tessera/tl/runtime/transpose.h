// tessera/tl/runtime/transpose.h - VW x VW block transposes in registers: how generated kernels read
// an on-chip buffer along its columns (docs/tl.md, "transposed reads") without per-lane gathers.
#pragma once

#include <cstdint>

#include "tessera/tl/runtime/transpose_blocks.h"
#include "tessera/tl/runtime/vector.h"

namespace tlrt {

namespace detail {

// An N x N block through M x M register transposes (M divides N).
template <int N, int M, class Reg, class Load, class Store, class Fn>
inline void transpose_by_blocks(Load load, Store store, Fn transpose) {
  for (int bi = 0; bi < N; bi += M) {
    for (int bj = 0; bj < N; bj += M) {
      Reg r[M];
      for (int k = 0; k < M; ++k) r[k] = load(bj + k, bi);  // rows bj.. of the source, columns bi..
      transpose(r);
      for (int k = 0; k < M; ++k) store(bi + k, bj, r[k]);  // rows bi.. of the result, columns bj..
    }
  }
}

}  // namespace detail

// dst[r * dst_stride + c] = src[c * src_stride + r] for r, c < VW (strides in elements; the blocks
// must not overlap). Bits are moved, never converted.
template <class T>
inline void transpose_block(T* __restrict dst, int64_t dst_stride, const T* __restrict src, int64_t src_stride) {
#if defined(__AVX512F__)
  if constexpr (VW == 16 && sizeof(T) == 4) {
    __m512i r[16];
    for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_si512(src + k * src_stride);
    transpose16x16_d(r);
    for (int k = 0; k < 16; ++k) _mm512_storeu_si512(dst + k * dst_stride, r[k]);
    return;
  }
  if constexpr (VW == 16 && sizeof(T) == 8) {
    detail::transpose_by_blocks<16, 8, __m512i>(
        [&](int row, int col) { return _mm512_loadu_si512(src + row * src_stride + col); },
        [&](int row, int col, __m512i v) { _mm512_storeu_si512(dst + row * dst_stride + col, v); }, transpose8x8_q);
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (VW == 8 && sizeof(T) == 4) {
    __m256i r[8];
    for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k * src_stride));
    transpose8x8_d(r);
    for (int k = 0; k < 8; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k * dst_stride), r[k]);
    return;
  }
  if constexpr (VW == 8 && sizeof(T) == 8) {
    detail::transpose_by_blocks<8, 4, __m256i>(
        [&](int row, int col) {
          return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + row * src_stride + col));
        },
        [&](int row, int col, __m256i v) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + row * dst_stride + col), v);
        },
        transpose4x4_q);
    return;
  }
#endif
  for (int r = 0; r < VW; ++r)
    for (int c = 0; c < VW; ++c) dst[r * dst_stride + c] = src[c * src_stride + r];
}

}  // namespace tlrt
