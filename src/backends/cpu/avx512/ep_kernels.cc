// ep kernels on 512-bit registers: streaming copies into other processes' receive regions, bf16
// reductions in fp32 and the per-128 FP8 cast of low-latency dispatch. Same bits as
// scalar/ep_kernels.cc (the rounding steps are the same integer operations, lane by lane).
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/ep_kernels.h"

namespace tessera::cpu {
namespace {

inline __m512 load_bf16(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Round to nearest even; every NaN becomes the canonical 0x7FC0 (see ep_kernels.h).
inline __m256i to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7F800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
  return _mm512_cvtepi32_epi16(r);
}

inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); }

void copy(void* dst, const void* src, size_t bytes, int streaming) {
  if (!streaming || bytes < 512) {
    memcpy(dst, src, bytes);
    return;
  }
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const size_t head = (64 - (uintptr_t(d) & 63)) & 63;
  memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    const __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64);
    const __m512i c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 192), e);
  }
  for (; i + 64 <= bytes; i += 64) _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
  memcpy(d + i, s + i, bytes - i);
}

void store_fence() { _mm_sfence(); }

// 32 values per step: two fp32 accumulators, one 64-byte store (non-temporal when streaming and the
// destination is 64-byte aligned); the tail uses masked 16-value steps.
void reduce_bf16(uint16_t* out, const uint16_t* const* rows, int num_rows, const uint16_t* bias0,
                 const uint16_t* bias1, int64_t n, int streaming) {
  int64_t h = 0;
  const bool stream = streaming && (reinterpret_cast<uintptr_t>(out) & 63) == 0;
  for (; h + 32 <= n; h += 32) {
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
    if (bias0) {
      lo = _mm512_add_ps(lo, load_bf16(bias0 + h, 0xFFFF));
      hi = _mm512_add_ps(hi, load_bf16(bias0 + h + 16, 0xFFFF));
    }
    if (bias1) {
      lo = _mm512_add_ps(lo, load_bf16(bias1 + h, 0xFFFF));
      hi = _mm512_add_ps(hi, load_bf16(bias1 + h + 16, 0xFFFF));
    }
    for (int i = 0; i < num_rows; ++i) {
      lo = _mm512_add_ps(lo, load_bf16(rows[i] + h, 0xFFFF));
      hi = _mm512_add_ps(hi, load_bf16(rows[i] + h + 16, 0xFFFF));
    }
    const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(lo)), to_bf16(hi), 1);
    if (stream) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + h), both);
    } else {
      _mm512_storeu_si512(out + h, both);
    }
  }
  for (; h < n; h += 16) {
    const __mmask16 m = tail_mask(n - h);
    __m512 acc = _mm512_setzero_ps();
    if (bias0) acc = _mm512_add_ps(acc, load_bf16(bias0 + h, m));
    if (bias1) acc = _mm512_add_ps(acc, load_bf16(bias1 + h, m));
    for (int i = 0; i < num_rows; ++i) acc = _mm512_add_ps(acc, load_bf16(rows[i] + h, m));
    _mm256_mask_storeu_epi16(out + h, m, to_bf16(acc));
  }
}

// 32 values per step (two accumulators, no masks) while they last, then masked 16-value steps. Per
// value the same sequence as the scalar kernel: acc = +0, then acc + (w * y) per row in order.
// Each row is prefetched 4 KiB ahead: the low-latency combine's rows (one per top-k lane, scattered
// over [E_local, R * max, H]) left the hardware prefetcher too little to go on. 128 tokens, top-8,
// 2 ranks, alternating runs: ll_combine_bf16 1156-1175 -> 906-956 us. reduce_bf16 (a few long rows
// per token) got 4-6% slower with the same prefetch (combine_bf16 6.07-6.24 -> 6.37-6.65 ms), so it
// has none.
void weighted_reduce_bf16(uint16_t* out, const uint16_t* const* rows, const float* weights, int num_rows, int64_t n) {
  int64_t h = 0;
  for (; h + 32 <= n; h += 32) {
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
    for (int i = 0; i < num_rows; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[i] + h) + 4096, _MM_HINT_T0);
      const __m512 w = _mm512_set1_ps(weights[i]);
      lo = _mm512_add_ps(lo, _mm512_mul_ps(w, load_bf16(rows[i] + h, 0xFFFF)));
      hi = _mm512_add_ps(hi, _mm512_mul_ps(w, load_bf16(rows[i] + h + 16, 0xFFFF)));
    }
    _mm512_storeu_si512(out + h, _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(lo)), to_bf16(hi), 1));
  }
  for (; h < n; h += 16) {
    const __mmask16 m = tail_mask(n - h);
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < num_rows; ++i) {
      const __m512 product = _mm512_mul_ps(_mm512_set1_ps(weights[i]), load_bf16(rows[i] + h, m));
      acc = _mm512_add_ps(acc, product);
    }
    _mm256_mask_storeu_epi16(out + h, m, to_bf16(acc));
  }
}

// e4m3fn codes of 16 values (see scalar/ep_kernels.cc: to_e4m3_sat).
inline __m128i to_e4m3_sat(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
  const __m512 big = _mm512_set1_ps(16384.0f);
  const __m512 t = _mm512_sub_ps(_mm512_add_ps(_mm512_castsi512_ps(a), big), big);
  const __m512i sub = _mm512_cvttps_epi32(_mm512_mul_ps(t, _mm512_set1_ps(512.0f)));
  const __m512i v = _mm512_sub_epi32(a, _mm512_set1_epi32(120 << 23));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 20), _mm512_set1_epi32(1));
  const __m512i norm = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(v, _mm512_set1_epi32(0x7FFFF)), lsb), 20);
  const __mmask16 small = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(0x3C800000));
  __m512i code = _mm512_mask_mov_epi32(norm, small, sub);
  code = _mm512_min_epu32(code, _mm512_set1_epi32(0x7E));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000));
  code = _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(0x7F));
  return _mm512_cvtepi32_epi8(_mm512_or_si512(code, sign));
}

uint32_t ceil_exponent(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u &= 0x7FFFFFFFu;
  uint32_t e = u >> 23;
  if ((u & 0x7FFFFFu) != 0 && e != 0) ++e;
  return e < 1 ? 1 : e > 254 ? 254 : e;
}

float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

// Three passes per chunk of up to 64 blocks, so no block waits on the one before: every block's amax
// (independent reductions overlap), the scales and their inverses 16 blocks per division, then the
// conversions. Same bits as one block at a time: the same IEEE divisions and roundings.
void cast_e4m3(uint8_t* out, float* scales, uint8_t* exponents, const uint16_t* x, int64_t n, int round_scale) {
  constexpr int kChunk = 64;
  alignas(64) float amax[kChunk], inverse[kChunk];
  const int64_t blocks = (n + 127) / 128;
  for (int64_t c0 = 0; c0 < blocks; c0 += kChunk) {
    const int nb = int(blocks - c0 < kChunk ? blocks - c0 : kChunk);
    for (int b = 0; b < nb; ++b) {
      const int64_t b0 = (c0 + b) * 128, len = n - b0 < 128 ? n - b0 : 128;
      __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
      if (len == 128) {
        for (int i = 0; i < 128; i += 32) {
          m0 = _mm512_max_ps(_mm512_abs_ps(load_bf16(x + b0 + i, 0xFFFF)), m0);  // NaN ignored
          m1 = _mm512_max_ps(_mm512_abs_ps(load_bf16(x + b0 + i + 16, 0xFFFF)), m1);
        }
      } else {
        for (int64_t i = 0; i < len; i += 16)
          m0 = _mm512_max_ps(_mm512_abs_ps(load_bf16(x + b0 + i, tail_mask(len - i))), m0);
      }
      amax[b] = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
    }
    if (round_scale) {
      for (int b = 0; b < nb; ++b) {
        const float a = amax[b] > 1e-4f ? amax[b] : 1e-4f;
        const uint32_t e = ceil_exponent(a / 448.0f);
        if (scales) scales[c0 + b] = float_of(e << 23);
        if (exponents) exponents[c0 + b] = uint8_t(e);
        inverse[b] = float_of((254u - e) << 23);
      }
    } else {
      for (int b = 0; b < nb; b += 16) {
        const __mmask16 m = tail_mask(nb - b);
        const __m512 a = _mm512_max_ps(_mm512_maskz_loadu_ps(m, amax + b), _mm512_set1_ps(1e-4f));
        if (scales) _mm512_mask_storeu_ps(scales + c0 + b, m, _mm512_div_ps(a, _mm512_set1_ps(448.0f)));
        _mm512_mask_storeu_ps(inverse + b, m, _mm512_div_ps(_mm512_set1_ps(448.0f), a));
      }
    }
    for (int b = 0; b < nb; ++b) {
      const int64_t b0 = (c0 + b) * 128, len = n - b0 < 128 ? n - b0 : 128;
      const __m512 inv = _mm512_set1_ps(inverse[b]);
      if (len == 128) {
        for (int i = 0; i < 128; i += 16)
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b0 + i),
                           to_e4m3_sat(_mm512_mul_ps(load_bf16(x + b0 + i, 0xFFFF), inv)));
      } else {
        for (int64_t i = 0; i < len; i += 16) {
          const __mmask16 m = tail_mask(len - i);
          _mm_mask_storeu_epi8(out + b0 + i, m, to_e4m3_sat(_mm512_mul_ps(load_bf16(x + b0 + i, m), inv)));
        }
      }
    }
  }
}

constexpr EpKernels kKernels{"avx512", copy, store_fence, reduce_bf16, weighted_reduce_bf16, cast_e4m3};

}  // namespace

const EpKernels* ep_kernels_avx512() { return &kKernels; }

}  // namespace tessera::cpu
