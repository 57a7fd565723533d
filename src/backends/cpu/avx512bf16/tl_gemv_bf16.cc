// The tile-language GEMV (see tl_gemv.h): four weight rows at a time, each 64-value chunk converted to
// bf16 in registers (fp8: two byte lookups and two zips, natural order so the bf16 activations line up
// without rearranging) and multiplied into every activation row with vdpbf16ps. About 10 instructions
// per 64 weights, so a dequantising GEMV runs at memory speed on two cores.
#include <immintrin.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/tl_gemv.h"

namespace tessera::cpu {
namespace {

using avx512bf16::E4m3Tables;

const E4m3Tables& tables() {
  static const E4m3Tables t = avx512bf16::make_e4m3_tables();
  return t;
}

inline __mmask64 byte_mask(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 64) return ~__mmask64(0);
  return (__mmask64(1) << valid) - 1;
}
inline __mmask32 word_mask(int64_t valid) {
  if (valid <= 0) return 0;
  if (valid >= 32) return 0xFFFFFFFFu;
  return (__mmask32(1) << valid) - 1;
}

template <bool kFp8>
inline void weights(const E4m3Tables& t, const char* row, int64_t k, int64_t valid, __m512i* v0, __m512i* v1) {
  if (kFp8) {
    const __m512i bytes = valid >= 64 ? _mm512_loadu_si512(row + k) : _mm512_maskz_loadu_epi8(byte_mask(valid), row + k);
    avx512bf16::e4m3x64_to_bf16(t, bytes, v0, v1);
  } else {
    const char* p = row + 2 * k;
    *v0 = valid >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(word_mask(valid), p);
    *v1 = valid >= 64 ? _mm512_loadu_si512(p + 64) : _mm512_maskz_loadu_epi16(word_mask(valid - 32), p + 64);
  }
}

template <int M, int R, bool kFp8>
void rows_block(const TlGemvArgs& g, int n0) {
  const E4m3Tables& t = tables();
  const int es = kFp8 ? 1 : 2;
  const char* w[R];
  for (int r = 0; r < R; ++r) w[r] = static_cast<const char*>(g.w) + (int64_t(n0) + r) * g.ldw * es;
  // Callers walk K in chunks (one T.gemm per K tile), so each row is a short stream the hardware
  // prefetcher loses among many rows: fetch the next two chunks of these rows ahead of time.
  const int64_t chunk_bytes = int64_t(g.k_len) * es;
  for (int r = 0; r < R; ++r)
    for (int64_t off = chunk_bytes; off < 3 * chunk_bytes; off += 64) _mm_prefetch(w[r] + off, _MM_HINT_T1);
  __m512 acc[M][R];
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < R; ++r) acc[m][r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < g.k_len; k += 64) {
    const int64_t valid = g.k_len - k;
    __m512i a0[M], a1[M];
    for (int m = 0; m < M; ++m) {
      const uint16_t* a = g.a + m * g.lda + k;
      a0[m] = valid >= 64 ? _mm512_loadu_si512(a) : _mm512_maskz_loadu_epi16(word_mask(valid), a);
      a1[m] = valid >= 64 ? _mm512_loadu_si512(a + 32) : _mm512_maskz_loadu_epi16(word_mask(valid - 32), a + 32);
    }
    for (int r = 0; r < R; ++r) {
      __m512i v0, v1;
      weights<kFp8>(t, w[r], k, valid, &v0, &v1);
      for (int m = 0; m < M; ++m) {
        acc[m][r] = _mm512_dpbf16_ps(acc[m][r], (__m512bh)v0, (__m512bh)a0[m]);
        acc[m][r] = _mm512_dpbf16_ps(acc[m][r], (__m512bh)v1, (__m512bh)a1[m]);
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < R; ++r) {
      float* o = g.out + m * g.ldo + n0 + r;
      const float s = _mm512_reduce_add_ps(acc[m][r]);
      *o = g.accumulate ? *o + s : s;
    }
}

template <int M, bool kFp8>
void run_rows(const TlGemvArgs& g) {
  int n = 0;
  for (; n + 4 <= g.n_rows; n += 4) rows_block<M, 4, kFp8>(g, n);
  for (; n < g.n_rows; ++n) rows_block<M, 1, kFp8>(g, n);
}

template <bool kFp8>
void run(const TlGemvArgs& g) {
  switch (g.rows) {
    case 1: return run_rows<1, kFp8>(g);
    case 2: return run_rows<2, kFp8>(g);
    case 3: return run_rows<3, kFp8>(g);
    default: return run_rows<4, kFp8>(g);
  }
}

void gemv(const TlGemvArgs& g) {
  if (g.w_fp8) return run<true>(g);
  run<false>(g);
}

}  // namespace

TlGemvFn tl_gemv_avx512bf16() { return gemv; }

}  // namespace tessera::cpu
