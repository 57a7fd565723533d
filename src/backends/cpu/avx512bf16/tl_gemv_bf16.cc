// The tile-language GEMV (see tl_gemv.h). A T.gemm per K tile hands this kernel short row segments
// (the bench: 64 weight rows x 128 fp8 values per call), so the fixed cost per row block matters as
// much as the cost per weight:
//  - fp8 weights convert in "lane order" (two byte lookups and an in-lane zip, like the library's
//    decode GEMV); the activation segment is rearranged into the same order once per call;
//  - four weight rows per block, one accumulator per (activation row, weight row), and the four sums
//    leave the registers through one transposed reduction (12 shuffles/adds instead of four full
//    horizontal sums; eight rows per block measured no faster);
//  - each block prefetches its rows' segment two calls ahead into L2 (callers walk K tile by tile, and
//    the hardware prefetcher loses track of dozens of short row streams; L1 would evict the lines first
//    because rows a multiple of 4 KiB apart share L1 sets).
// Measured (64 rows x 128 fp8 per call, weights in L2, one core): ~260 -> ~180 ns per call with one
// activation row, ~600 -> ~300 ns with four; `tessera bench tl` gemv_fp8: 0.68 -> 0.83x of a parallel
// read of the same bytes in the same run. Prefetching into L1 instead of L2 dropped the bench to 0.6x;
// one to four calls ahead measured alike.
#include <immintrin.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/avx512bf16/masks.h"
#include "backends/cpu/tl_gemv.h"

namespace tessera::cpu {
namespace {

using avx512bf16::byte_mask;
using avx512bf16::E4m3Tables;
using avx512bf16::word_mask;

// K values of the activation rows rearranged per pass (4 rows x 2048 bf16 = 16 KiB on the stack).
constexpr int kSegment = 2048;
constexpr int kMaxRows = 4;

// The activation segment [k0, k0 + len) as bf16 in the weights' order, zero-padded to whole 64-value
// chunks: lane order for fp8 weights (words {0-7, 16-23, 32-39, 48-55} then {8-15, 24-31, 40-47,
// 56-63} of each chunk, the order e4m3x64_to_bf16_lanes produces), natural order for bf16 weights.
void arrange_activations(const TlGemvArgs& g, int64_t k0, int len, bool lane_order, uint16_t* dst) {
  alignas(64) static const uint16_t kFirst[32] = {0,  1,  2,  3,  4,  5,  6,  7,  16, 17, 18, 19, 20, 21, 22, 23,
                                                  32, 33, 34, 35, 36, 37, 38, 39, 48, 49, 50, 51, 52, 53, 54, 55};
  const __m512i first = _mm512_load_si512(kFirst);
  const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(8));
  const int chunks = (len + 63) / 64;
  for (int m = 0; m < g.rows; ++m) {
    const uint16_t* src = g.a + m * g.lda + k0;
    uint16_t* out = dst + int64_t(m) * chunks * 64;
    for (int c = 0; c < chunks; ++c) {
      const int valid = len - 64 * c;
      const __m512i a0 = _mm512_maskz_loadu_epi16(word_mask(valid), src + 64 * c);
      const __m512i a1 = _mm512_maskz_loadu_epi16(word_mask(valid - 32), src + 64 * c + 32);
      _mm512_store_si512(out + 64 * c, lane_order ? _mm512_permutex2var_epi16(a0, first, a1) : a0);
      _mm512_store_si512(out + 64 * c + 32, lane_order ? _mm512_permutex2var_epi16(a0, second, a1) : a1);
    }
  }
}

template <bool kFp8, bool kMasked>
inline void weights(const E4m3Tables& t, const char* p, int64_t valid, __m512i* v0, __m512i* v1) {
  if (kFp8) {
    const __m512i bytes = kMasked ? _mm512_maskz_loadu_epi8(byte_mask(valid), p) : _mm512_loadu_si512(p);
    avx512bf16::e4m3x64_to_bf16_lanes(t, bytes, v0, v1);
  } else {
    *v0 = kMasked ? _mm512_maskz_loadu_epi16(word_mask(valid), p) : _mm512_loadu_si512(p);
    *v1 = kMasked ? _mm512_maskz_loadu_epi16(word_mask(valid - 32), p + 64) : _mm512_loadu_si512(p + 64);
  }
}

// {sum(x[0]), ..., sum(x[3])}.
inline __m128 reduce4(const __m512* x) {
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x44), _mm512_shuffle_f32x4(x[0], x[1], 0xEE));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], 0x44), _mm512_shuffle_f32x4(x[2], x[3], 0xEE));
  __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4E));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, 0xB1));  // 128-bit block i: sum(x[i]) in every lane
  return _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s));
}

template <bool B>
struct Masked {
  static constexpr bool value = B;
};

struct Pass {
  const uint16_t* a;  // arranged activations, row m at a + m * a_stride
  int64_t a_stride;
  int64_t k0;        // first K value of the pass
  int len;           // K values in the pass
  int64_t prefetch;  // bytes ahead in each weight row to prefetch (0: none)
};

// out[m][n0 .. n0 + R) (+)= the pass's part of the dot products of R weight rows. kLen > 0: the pass
// is exactly kLen values long (a whole number of 64-value chunks), so the chunk loop unrolls.
template <int M, int R, bool kFp8, int kLen = 0>
__attribute__((always_inline)) inline void rows_block(const E4m3Tables& t, const TlGemvArgs& g, const Pass& p, int n0,
                                                      bool accumulate) {
  constexpr int es = kFp8 ? 1 : 2;
  const char* w[R];
  for (int r = 0; r < R; ++r) w[r] = static_cast<const char*>(g.w) + ((int64_t(n0) + r) * g.ldw + p.k0) * es;
  if (p.prefetch)
    for (int64_t off = 0; off < int64_t(kLen > 0 ? kLen : p.len) * es; off += 64)
      for (int r = 0; r < R; ++r) _mm_prefetch(w[r] + p.prefetch + off, _MM_HINT_T1);
  __m512 acc[M][R];
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < R; ++r) acc[m][r] = _mm512_setzero_ps();
  auto chunk = [&](int64_t k, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    __m512i v0[R], v1[R];
    for (int r = 0; r < R; ++r) weights<kFp8, kMasked>(t, w[r] + k * es, p.len - k, &v0[r], &v1[r]);
    for (int m = 0; m < M; ++m) {
      const __m512bh a0 = (__m512bh)_mm512_load_si512(p.a + m * p.a_stride + k);
      const __m512bh a1 = (__m512bh)_mm512_load_si512(p.a + m * p.a_stride + k + 32);
      for (int r = 0; r < R; ++r) {
        acc[m][r] = _mm512_dpbf16_ps(acc[m][r], (__m512bh)v0[r], a0);
        acc[m][r] = _mm512_dpbf16_ps(acc[m][r], (__m512bh)v1[r], a1);
      }
    }
  };
  int64_t k = 0;
  if constexpr (kLen > 0) {
    for (; k < kLen; k += 64) chunk(k, Masked<false>{});
  } else {
    for (; k + 64 <= p.len; k += 64) chunk(k, Masked<false>{});
    if (k < p.len) chunk(k, Masked<true>{});
  }
  for (int m = 0; m < M; ++m) {
    float* o = g.out + m * g.ldo + n0;
    if constexpr (R == 4) {
      __m128 s = reduce4(acc[m]);
      if (accumulate) s = _mm_add_ps(s, _mm_loadu_ps(o));
      _mm_storeu_ps(o, s);
    } else {
      for (int r = 0; r < R; ++r) {
        const float s = _mm512_reduce_add_ps(acc[m][r]);
        o[r] = accumulate ? o[r] + s : s;
      }
    }
  }
}

template <int M, bool kFp8>
void run_pass(const TlGemvArgs& g, const Pass& p, bool accumulate) {
  const E4m3Tables t = avx512bf16::e4m3_tables();  // a local copy stays in registers across the row blocks
  int n = 0;
  // A T.gemm per 128-wide K tile (DeepSeek's scale block) is the common call: its fixed length saves
  // ~12% per call (149 vs 168 ns for 64 rows x 128 fp8 values, one row of A, L2-resident; 129 ns once
  // the fp8 bytes were no longer loaded three times, see fp8_convert.h).
  if (p.len == 128)
    for (; n + 4 <= g.n_rows; n += 4) rows_block<M, 4, kFp8, 128>(t, g, p, n, accumulate);
  for (; n + 4 <= g.n_rows; n += 4) rows_block<M, 4, kFp8>(t, g, p, n, accumulate);
  for (; n < g.n_rows; ++n) rows_block<M, 1, kFp8>(t, g, p, n, accumulate);
}

template <bool kFp8>
void run(const TlGemvArgs& g, const Pass& p, bool accumulate) {
  switch (g.rows) {
    case 1:
      return run_pass<1, kFp8>(g, p, accumulate);
    case 2:
      return run_pass<2, kFp8>(g, p, accumulate);
    case 3:
      return run_pass<3, kFp8>(g, p, accumulate);
    default:
      return run_pass<4, kFp8>(g, p, accumulate);
  }
}

void gemv(const TlGemvArgs& g) {
  if (g.rows <= 0 || g.rows > kMaxRows || g.n_rows <= 0) return;
  alignas(64) uint16_t arranged[kMaxRows * kSegment];
  const int es = g.w_fp8 ? 1 : 2;
  const int64_t passes = g.k_len > kSegment ? (int64_t(g.k_len) + kSegment - 1) / kSegment : 1;
  for (int64_t pass = 0; pass < passes; ++pass) {
    Pass p;
    p.k0 = pass * kSegment;
    p.len = int(g.k_len - p.k0 < kSegment ? g.k_len - p.k0 : kSegment);
    p.a = arranged;
    p.a_stride = (p.len + 63) / 64 * 64;
    // Two calls ahead: the same K range of each row when rows are longer than the call's K range
    // (a row-major matrix walked K tile by K tile); the bytes two tiles further on when the call's rows
    // are one contiguous tile (weights stored tile by tile, walked tile after tile).
    const bool contiguous = g.ldw == g.k_len;
    p.prefetch = 2 * int64_t(g.k_len) * es * (contiguous ? g.n_rows : 1);
    arrange_activations(g, p.k0, p.len, g.w_fp8 != 0, arranged);
    const bool accumulate = g.accumulate || pass > 0;
    if (g.w_fp8) {
      run<true>(g, p, accumulate);
    } else {
      run<false>(g, p, accumulate);
    }
  }
}

}  // namespace

TlGemvFn tl_gemv_avx512bf16() {
  return gemv;
}

}  // namespace tessera::cpu
