// D = round(C + tile) with AVX-512: 16 outputs per step, 16 x 16 in-register transposes for tiles the
// micro-kernel produced transposed (swapped orientation). Measured (1 core, 256 x 144 tile, bf16 D):
// the portable loops take ~0.9-1.0 ns per element, which is 40% of a K=512 GEMM. Large D is written
// with non-temporal stores (FinalizeArgs::stream).
#include <immintrin.h>
#include <stdint.h>

#include "backends/cpu/avx512/f32_vec.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

inline __mmask16 lane_mask(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 16) return 0xFFFF;
  return __mmask16((1u << valid) - 1);
}

// Round-to-nearest-even fp32 -> bf16 with the scalar rule for NaN (0x7FC0 | sign).
inline __m256i to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i abs = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7F800000));
  const __m512i qnan = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x8000)),
                                       _mm512_set1_epi32(0x7FC0));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, qnan));
}

inline __m512 load_c(const FinalizeArgs& a, int64_t i, int64_t j, __mmask16 m) {
  if (!a.c) return _mm512_setzero_ps();
  if (!a.c_bf16) return _mm512_maskz_loadu_ps(m, static_cast<const float*>(a.c) + i * a.ldc + j);
  const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(a.c) + i * a.ldc + j);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

inline bool line_aligned(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 63) == 0;
}

inline void store_d(const FinalizeArgs& a, int64_t i, int64_t j, __mmask16 m, __m512 v) {
  if (a.d_bf16) {
    _mm256_mask_storeu_epi16(static_cast<uint16_t*>(a.d) + i * a.ldd + j, m, to_bf16(v));
    return;
  }
  float* d = static_cast<float*>(a.d) + i * a.ldd + j;
  if (a.stream && m == 0xFFFF && line_aligned(d)) {
    _mm512_stream_ps(d, v);
  } else {
    _mm512_mask_storeu_ps(d, m, v);
  }
}

// 32 bf16 D values from j on: one non-temporal line when streaming and aligned, else two stores.
inline void store_d_bf16_pair(const FinalizeArgs& a, int64_t i, int64_t j, __m512 v0, __m512 v1) {
  uint16_t* d = static_cast<uint16_t*>(a.d) + i * a.ldd + j;
  if (a.stream && line_aligned(d)) {
    const __m512i line = _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(v0)), to_bf16(v1), 1);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d), line);
  } else {
    store_d(a, i, j, 0xFFFF, v0);
    store_d(a, i, j + 16, 0xFFFF, v1);
  }
}

// Streaming D: the columns before the first line boundary, the same in every row when a row is whole
// lines, go out with ordinary stores so the rest is written as whole non-temporal lines. (A D that starts
// 16 bytes into a line, as numpy arrays do, otherwise took every store the slow way: 1.1 vs 0.47 ns per
// bf16 output, 256 x 1024 transposed block, one thread.)
inline int64_t stream_head(const FinalizeArgs& a) {
  const int es = a.d_bf16 ? 2 : 4;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(a.d);
  if (!a.stream || addr % es != 0 || (a.ldd * es) % 64 != 0) return 0;
  const int64_t head = int64_t((64 - addr % 64) % 64 / es);
  return head < a.cols ? head : a.cols;
}

// The end of the columns from `head` on that go out as 32-value lines (bf16 D streamed); else head.
inline int64_t pairs_end(const FinalizeArgs& a, int64_t head) {
  return a.stream && a.d_bf16 ? head + (a.cols - head) / 32 * 32 : head;
}

// D row i, columns [j0, j1) (16 at a time, the last masked) from the natural tile.
inline void natural_span(const FinalizeArgs& a, int64_t i, int64_t j0, int64_t j1) {
  const float* row = a.tile + i * a.ldt;
  for (int64_t j = j0; j < j1; j += 16) {
    const __mmask16 m = lane_mask(j1 - j);
    store_d(a, i, j, m, _mm512_add_ps(load_c(a, i, j, m), _mm512_maskz_loadu_ps(m, row + j)));
  }
}

void finalize_natural(const FinalizeArgs& a) {
  const int64_t head = stream_head(a), pairs = pairs_end(a, head);
  for (int64_t i = 0; i < a.rows; ++i) {
    const float* row = a.tile + i * a.ldt;
    natural_span(a, i, 0, head);
    for (int64_t j = head; j < pairs; j += 32)
      store_d_bf16_pair(a, i, j, _mm512_add_ps(load_c(a, i, j, 0xFFFF), _mm512_loadu_ps(row + j)),
                        _mm512_add_ps(load_c(a, i, j + 16, 0xFFFF), _mm512_loadu_ps(row + j + 16)));
    natural_span(a, i, pairs, a.cols);
  }
}

// Tile rows j0..j0+15 (D columns), D rows i0..i0+15 of each, transposed: blk[t] holds D row i0 + t.
inline void load_transposed(const FinalizeArgs& a, int64_t i0, int64_t j0, __m512 blk[16]) {
  const __mmask16 row_mask = lane_mask(a.rows - i0);
  for (int t = 0; t < 16; ++t)
    blk[t] = j0 + t < a.cols ? _mm512_maskz_loadu_ps(row_mask, a.tile + (j0 + t) * a.ldt + i0) : _mm512_setzero_ps();
  Avx512F32::transpose(blk);
}

// D rows i0..i0+rows-1, columns [j0, j1) (16 at a time, the last masked) from the transposed tile.
inline void transposed_span(const FinalizeArgs& a, int64_t i0, int rows, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; j += 16) {
    __m512 blk[16];
    load_transposed(a, i0, j, blk);
    const __mmask16 m = lane_mask(j1 - j);
    for (int t = 0; t < rows; ++t) store_d(a, i0 + t, j, m, _mm512_add_ps(load_c(a, i0 + t, j, m), blk[t]));
  }
}

void finalize_transposed(const FinalizeArgs& a) {
  // Streaming bf16 D takes 16 x 32 blocks from the head on, so every D row's part is a whole line.
  const int64_t head = stream_head(a), pairs = pairs_end(a, head);
  for (int64_t i0 = 0; i0 < a.rows; i0 += 16) {
    const int rows = int(a.rows - i0 < 16 ? a.rows - i0 : 16);
    transposed_span(a, i0, rows, 0, head);
    for (int64_t j0 = head; j0 < pairs; j0 += 32) {
      __m512 lo[16], hi[16];
      load_transposed(a, i0, j0, lo);
      load_transposed(a, i0, j0 + 16, hi);
      for (int t = 0; t < rows; ++t)
        store_d_bf16_pair(a, i0 + t, j0, _mm512_add_ps(load_c(a, i0 + t, j0, 0xFFFF), lo[t]),
                          _mm512_add_ps(load_c(a, i0 + t, j0 + 16, 0xFFFF), hi[t]));
    }
    transposed_span(a, i0, rows, pairs, a.cols);
  }
}

void finalize(const FinalizeArgs& a) {
  if (a.transposed) {
    finalize_transposed(a);
  } else {
    finalize_natural(a);
  }
  // Non-temporal stores are weakly ordered: fence them before the thread reports its work done.
  if (a.stream) _mm_sfence();
}

}  // namespace

FinalizeFn gemm_finalize_avx512() {
  return finalize;
}

}  // namespace tessera::cpu
