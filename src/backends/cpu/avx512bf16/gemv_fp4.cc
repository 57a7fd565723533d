// Decode GEMV over packed FP4 weights (avx512bf16): 128 K-values of a weight row are 64 bytes, converted
// with in-lane byte lookups (vpshufb) and zips into "fp4 lane order" (the activations are permuted the same
// way once per call), and the per-32 power-of-two scales are folded in by adding (e - 127) << 7 to the
// bf16 exponent of every non-zero value (exact). The activation scale is applied per 128-wide group in
// fp32, like the FP8 GEMV. Measured before the lane-order rewrite (cross-lane spreads, scalar exponent
// handling): 10.7 GB/s on 2 cores for M=1, N=K=7168.
#include <immintrin.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/avx512bf16/masks.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

using avx512bf16::byte_mask;
using avx512bf16::word_mask;

using avx512bf16::E4m3Tables;

const E4m3Tables& fp8_tables() {
  static const E4m3Tables t = avx512bf16::make_e4m3_tables();
  return t;
}


// 64 packed bytes (128 values) -> four bf16 vectors in "fp4 lane order" with in-lane byte ops only:
// out[0] lane L word j = value 32L + 2j, out[1] = 32L + 16 + 2j, out[2] = 32L + 2j + 1,
// out[3] = 32L + 16 + 2j + 1 (L = 128-bit lane, j = 0..7). Every 128-bit lane L of every output holds
// values of 32-block L only, so one per-lane exponent vector scales all four.
struct Fp4Tables {
  __m512i lo_byte, hi_byte;  // vpshufb tables: nibble code -> low / high byte of its bf16 pattern
};

Fp4Tables make_fp4_tables() {
  static const uint16_t kBits[8] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0};
  alignas(64) uint8_t lo[64], hi[64];
  for (int i = 0; i < 64; ++i) {
    const int c = i & 15;
    const uint16_t w = uint16_t(kBits[c & 7] | ((c & 8) ? 0x8000 : 0));
    lo[i] = uint8_t(w & 0xFF);
    hi[i] = uint8_t(w >> 8);
  }
  Fp4Tables t;
  t.lo_byte = _mm512_load_si512(lo);
  t.hi_byte = _mm512_load_si512(hi);
  return t;
}

const Fp4Tables& lane_tables() {
  static const Fp4Tables t = make_fp4_tables();
  return t;
}

inline void fp4x128_to_bf16_lanes(const Fp4Tables& t, __m512i x, __m512i out[4]) {
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i even = _mm512_and_si512(x, nib);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi16(x, 4), nib);
  const __m512i le = _mm512_shuffle_epi8(t.lo_byte, even), he = _mm512_shuffle_epi8(t.hi_byte, even);
  const __m512i lo_ = _mm512_shuffle_epi8(t.lo_byte, odd), ho = _mm512_shuffle_epi8(t.hi_byte, odd);
  out[0] = _mm512_unpacklo_epi8(le, he);
  out[1] = _mm512_unpackhi_epi8(le, he);
  out[2] = _mm512_unpacklo_epi8(lo_, ho);
  out[3] = _mm512_unpackhi_epi8(lo_, ho);
}

// Natural index of word w of lane-order output q (see above).
inline int lane_order_value(int q, int w) { return 32 * (w / 8) + ((q & 1) ? 16 : 0) + 2 * (w % 8) + (q >> 1); }

// Per-lane (e_L - 127) << 7 from a word of four exponent bytes (lane L takes byte L).
inline __m512i exp_shift_lanes(uint32_t word) {
  alignas(64) static const uint8_t kIdx[64] = {
      0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 1, 64, 1, 64, 1, 64, 1, 64, 1, 64, 1, 64,
      1, 64, 1, 64, 2, 64, 2, 64, 2, 64, 2, 64, 2, 64, 2, 64, 2, 64, 2, 64, 3, 64, 3, 64, 3, 64, 3, 64,
      3, 64, 3, 64, 3, 64, 3, 64};
  const __mmask64 low_bytes = 0x5555555555555555ull;
  const __m512i e = _mm512_maskz_permutexvar_epi8(low_bytes, _mm512_load_si512(kIdx), _mm512_set1_epi32(int(word)));
  return _mm512_sub_epi16(_mm512_slli_epi16(e, 7), _mm512_set1_epi16(127 << 7));
}

template <int M, int NB, bool kScaled>
bool gemv_block(const GemvFp4Args& p, const uint16_t* a, int64_t lda, int64_t n) {
  const Fp4Tables t = lane_tables();
  const uint8_t* w[NB];
  const uint8_t* ex[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) {
    w[j] = p.w + (n + j) * p.ldw;
    ex[j] = p.w_exp + (p.w_row0 + n + j) * p.exp_row_bytes;
  }
  const int64_t next = n + 2 * NB <= p.n1 ? NB * p.ldw : 0;
  const int64_t k_pad = (p.k + 127) / 128 * 128, k_full = p.k / 128 * 128;
  const int64_t group = kScaled ? p.a_group : k_pad;
  __m512 tot[M][NB];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) tot[m][j] = _mm512_setzero_ps();
  // Running byte-wise min / max of the exponents, checked once at the end.
  __m128i e_min = _mm_set1_epi8(char(0xFF)), e_max = _mm_setzero_si128();
  int64_t g = 0;
  for (int64_t kb = 0; kb < k_pad; kb += group, ++g) {
    const int64_t ke = kb + group < k_pad ? kb + group : k_pad;
    __m512 acc[M][NB];
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) acc[m][j] = _mm512_setzero_ps();
    for (int64_t k = kb; k < ke; k += 128) {  // 128 values = 64 bytes = one exponent word per row
      __m512i v[NB][4];
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        if (next) _mm_prefetch(reinterpret_cast<const char*>(w[j] + next + k / 2), _MM_HINT_T0);
        __m512i bytes;
        uint32_t word;
        if (k < k_full) {
          bytes = _mm512_loadu_si512(w[j] + k / 2);
          __builtin_memcpy(&word, ex[j] + (k / 128) * p.exp_word_bytes, 4);
        } else {  // K tail: fewer bytes and exponent blocks; missing blocks are neutral (127)
          bytes = _mm512_maskz_loadu_epi8(byte_mask((p.k - k) / 2), w[j] + k / 2);
          const int64_t blocks = (p.k - k + 31) / 32;
          word = 0;
          for (int b = 0; b < 4; ++b)
            word |= uint32_t(b < blocks ? ex[j][(k / 128) * p.exp_word_bytes + b] : 127) << (8 * b);
        }
        const __m128i ew = _mm_cvtsi32_si128(int(word));
        e_min = _mm_min_epu8(e_min, ew);
        e_max = _mm_max_epu8(e_max, ew);
        fp4x128_to_bf16_lanes(t, bytes, v[j]);
        const __m512i shift = exp_shift_lanes(word);
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __mmask32 nonzero = _mm512_test_epi16_mask(v[j][q], _mm512_set1_epi16(0x7FFF));
          v[j][q] = _mm512_mask_add_epi16(v[j][q], nonzero, v[j][q], shift);
        }
      }
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m512bh av = (__m512bh)_mm512_loadu_si512(a + m * lda + k + 32 * q);
#pragma GCC unroll 4
          for (int j = 0; j < NB; ++j) acc[m][j] = _mm512_dpbf16_ps(acc[m][j], av, (__m512bh)v[j][q]);
        }
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      const __m512 s = kScaled ? _mm512_set1_ps(p.a_scale[g * p.a_scale_stride + m]) : _mm512_set1_ps(1.0f);
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) tot[m][j] = _mm512_fmadd_ps(acc[m][j], s, tot[m][j]);
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) p.out[m * p.ldo + n + j] = _mm512_reduce_add_ps(tot[m][j]);
  const uint32_t lo = uint32_t(_mm_cvtsi128_si32(e_min)), hi = uint32_t(_mm_cvtsi128_si32(e_max));
  for (int b = 0; b < 4; ++b)
    if (((lo >> (8 * b)) & 0xFF) < 2 || ((hi >> (8 * b)) & 0xFF) > 252) return false;
  return true;
}

// Activations as bf16 rows of round_up(K, 128) values in the weights' lane order, zero beyond K.
void prepare_activations(const GemvFp4Args& p, uint16_t* dst, int64_t k_pad) {
  // vpermi2w indices: lanes 0-1 of output q come from the first 64 values, lanes 2-3 from the last 64.
  alignas(64) uint16_t idx[4][32];
  for (int q = 0; q < 4; ++q)
    for (int w = 0; w < 32; ++w) idx[q][w] = uint16_t(lane_order_value(q, w) & 63);
  for (int m = 0; m < p.m; ++m) {
    for (int64_t k = 0; k < k_pad; k += 128) {
      __m512i nat[4];
      for (int h = 0; h < 2; ++h) {
        const int64_t kk = k + 64 * h;
        if (p.a_type == GemmSrcType::kE4M3) {
          const uint8_t* row = static_cast<const uint8_t*>(p.a) + m * p.a_stride;
          avx512bf16::e4m3x64_to_bf16(fp8_tables(), _mm512_maskz_loadu_epi8(byte_mask(p.k - kk), row + kk), &nat[2 * h],
                                      &nat[2 * h + 1]);
        } else {
          const uint16_t* row = static_cast<const uint16_t*>(p.a) + m * p.a_stride;
          nat[2 * h] = _mm512_maskz_loadu_epi16(word_mask(p.k - kk), row + kk);
          nat[2 * h + 1] = _mm512_maskz_loadu_epi16(word_mask(p.k - kk - 32), row + kk + 32);
        }
      }
      for (int q = 0; q < 4; ++q) {
        const __m512i ix = _mm512_load_si512(idx[q]);
        const __m512i lo = _mm512_permutex2var_epi16(nat[0], ix, nat[1]);
        const __m512i hi = _mm512_permutex2var_epi16(nat[2], ix, nat[3]);
        _mm512_storeu_si512(dst + m * k_pad + k + 32 * q, _mm512_mask_blend_epi16(0xFFFF0000u, lo, hi));
      }
    }
  }
}

template <int M, bool kScaled>
bool gemv_rows(const GemvFp4Args& p, const uint16_t* a, int64_t lda) {
  constexpr int kNb = M <= 2 ? 2 : 1;
  bool ok = true;
  int64_t n = p.n0;
  for (; n + kNb <= p.n1; n += kNb) ok &= gemv_block<M, kNb, kScaled>(p, a, lda, n);
  for (; n < p.n1; ++n) ok &= gemv_block<M, 1, kScaled>(p, a, lda, n);
  return ok;
}

template <bool kScaled>
bool dispatch(const GemvFp4Args& p, const uint16_t* a, int64_t lda) {
  switch (p.m) {
    case 1: return gemv_rows<1, kScaled>(p, a, lda);
    case 2: return gemv_rows<2, kScaled>(p, a, lda);
    case 3: return gemv_rows<3, kScaled>(p, a, lda);
    case 4: return gemv_rows<4, kScaled>(p, a, lda);
    case 5: return gemv_rows<5, kScaled>(p, a, lda);
    case 6: return gemv_rows<6, kScaled>(p, a, lda);
    case 7: return gemv_rows<7, kScaled>(p, a, lda);
    default: return gemv_rows<8, kScaled>(p, a, lda);
  }
}

bool gemv_fp4(const GemvFp4Args& p) {
  const int64_t k_pad = (p.k + 127) / 128 * 128;
  uint16_t* a = static_cast<uint16_t*>(p.scratch);
  prepare_activations(p, a, k_pad);
  return p.a_scale ? dispatch<true>(p, a, k_pad) : dispatch<false>(p, a, k_pad);
}

}  // namespace

GemvFp4Fn gemv_fp4_kernel_avx512bf16() { return gemv_fp4; }

}  // namespace tessera::cpu
