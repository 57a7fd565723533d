// Packed FP4 (e2m1) weights and their activations in "fp4 lane order", shared by the FP4 decode GEMVs
// (avx512bf16/gemv_fp4.cc on vdpbf16ps, amx/gemv_amx_fp4.cc on tiles). Static (folder-private, see
// backends/cpu/README.md rule 1).
//
// 64 packed bytes hold 128 K-values; read as 32 words, nibble q of word i is value 4i + q. Looking the
// nibbles up word by word gives four bf16 vectors out[q] whose word i is value 4i + q, so 128-bit lane
// L of every out[q] holds values from 32L .. 32L+31 only: one 32-value block, one UE8M0 scale. The
// activations are permuted the same way once per call, so products pair up correctly.
#pragma once

#include <immintrin.h>
#include <stdint.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/avx512bf16/masks.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu::avx512bf16 {

// Natural index (within a 128-value chunk) of word w of lane-order output q.
static inline int fp4_lane_order_value(int q, int w) {
  return 4 * w + q;
}

// A 32-word vpermw table: entry i is the bf16 bits of e2m1 code i & 15 (entries 16-31 repeat 0-15, so
// the bit above the nibble, which the lookup also reads, is ignored) with `exponent_bias` added to the
// exponent field of every nonzero value; both zero codes give +0.
static inline __m512i make_fp4_table(int exponent_bias) {
  static const uint16_t kBits[8] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0};
  alignas(64) uint16_t table[32];
  for (int i = 0; i < 32; ++i) {
    const uint16_t magnitude = kBits[i & 7];
    table[i] = magnitude == 0 ? 0 : uint16_t((magnitude + (exponent_bias << 7)) | ((i & 8) ? 0x8000 : 0));
  }
  return _mm512_load_si512(table);
}

// 64 packed bytes (128 values) -> four bf16 vectors in lane order (see above).
static inline void fp4x128_to_bf16_lanes(__m512i table, __m512i x, __m512i out[4]) {
  out[0] = _mm512_permutexvar_epi16(x, table);
  out[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 4), table);
  out[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 8), table);
  out[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(x, 12), table);
}

// A weight row's 128-value chunk at K offset k: its 64 packed bytes and its four 32-value blocks'
// exponent bytes as one word (byte b for block b); past K, zero bytes and the neutral exponent 127.
static inline void fp4_weight_chunk(const GemvFp4Args& p, const uint8_t* row, const uint8_t* exp_row, int64_t k,
                                    __m512i* bytes, uint32_t* word) {
  const uint8_t* exps = exp_row + (k / 128) * p.exp_word_bytes;
  if (k + 128 <= p.k) {
    *bytes = _mm512_loadu_si512(row + k / 2);
    __builtin_memcpy(word, exps, 4);
    return;
  }
  *bytes = _mm512_maskz_loadu_epi8(byte_mask((p.k - k) / 2), row + k / 2);
  const int64_t blocks = (p.k - k + 31) / 32;
  *word = 0;
  for (int b = 0; b < 4; ++b) *word |= uint32_t(b < blocks ? exps[b] : 127) << (8 * b);
}

// Byte-wise running minimum and maximum of exponent words, checked once at the end of a call.
static inline void fp4_exponent_range_add(uint32_t word, __m128i* lo, __m128i* hi) {
  const __m128i w = _mm_cvtsi32_si128(int(word));
  *lo = _mm_min_epu8(*lo, w);
  *hi = _mm_max_epu8(*hi, w);
}
static inline bool fp4_exponents_within(__m128i lo, __m128i hi, int min, int max) {
  const uint32_t l = uint32_t(_mm_cvtsi128_si32(lo)), h = uint32_t(_mm_cvtsi128_si32(hi));
  for (int b = 0; b < 4; ++b)
    if (int((l >> (8 * b)) & 0xFF) < min || int((h >> (8 * b)) & 0xFF) > max) return false;
  return true;
}

// Where the FP4 kernels keep the activation-scale exponents: GemvFp4Args::scratch holds up to 16 bytes
// per K value of prepared activations first (8 rows of bf16, or the tiles' 8 columns), then these
// (at most k_pad / 128 groups x 8 rows).
static inline int* fp4_exponent_scratch(const GemvFp4Args& p, int64_t k_pad) {
  return reinterpret_cast<int*>(static_cast<char*>(p.scratch) + 16 * k_pad);
}

// The exponent s of every activation scale (exps[g * m + mi], `groups` a_group-wide groups) when all of
// them are 2^s with |s| <= max_shift (UE8M0 scales always are powers of two) and the activations are
// e4m3; otherwise false. Such scales can ride on the bf16 activations themselves (exponent field + s:
// e4m3 magnitudes 2^-9..448 stay normal for |s| <= 100), which gives the same bits as multiplying the
// sums (scaling by a power of two commutes with every rounding on the way, while products and sums
// stay normal). exps holds at least groups * m ints.
static inline bool fp4_pow2_activation_scales(const GemvFp4Args& p, int64_t groups, int max_shift, int* exps) {
  if (!p.a_scale || p.a_type != GemmSrcType::kE4M3) return false;
  for (int64_t g = 0; g < groups; ++g)
    for (int m = 0; m < p.m; ++m)
      if (!scalar_convert::power_of_two_exponent(p.a_scale[g * p.a_scale_stride + m], -max_shift, max_shift,
                                                 &exps[g * p.m + m]))
        return false;
  return true;
}

// vpermi2w indices from natural to lane order: lanes 0-1 of output q come from the chunk's first 64
// values, lanes 2-3 from the last 64.
struct Fp4LaneIndex {
  __m512i q[4];
};
static inline const Fp4LaneIndex& fp4_lane_index() {
  static const Fp4LaneIndex t = [] {
    Fp4LaneIndex r;
    alignas(64) uint16_t idx[32];
    for (int q = 0; q < 4; ++q) {
      for (int w = 0; w < 32; ++w) idx[w] = uint16_t(fp4_lane_order_value(q, w) & 63);
      r.q[q] = _mm512_load_si512(idx);
    }
    return r;
  }();
  return t;
}

// Activation row m's 128-value chunk at K offset k as four bf16 vectors in lane order, zero beyond K;
// with `exps`, each finite nonzero value times its group's 2^exps[(k / a_group) * p.m + m].
static inline void fp4_activation_chunk_lanes(const GemvFp4Args& p, int m, int64_t k, const int* exps, __m512i out[4]) {
  __m512i nat[4];
  for (int h = 0; h < 2; ++h) {
    const int64_t kk = k + 64 * h;
    if (p.a_type == GemmSrcType::kE4M3) {
      const uint8_t* row = static_cast<const uint8_t*>(p.a) + m * p.a_stride;
      e4m3x64_to_bf16(e4m3_tables(), _mm512_maskz_loadu_epi8(byte_mask(p.k - kk), row + kk), &nat[2 * h],
                      &nat[2 * h + 1]);
    } else {
      const uint16_t* row = static_cast<const uint16_t*>(p.a) + m * p.a_stride;
      nat[2 * h] = _mm512_maskz_loadu_epi16(word_mask(p.k - kk), row + kk);
      nat[2 * h + 1] = _mm512_maskz_loadu_epi16(word_mask(p.k - kk - 32), row + kk + 32);
    }
  }
  if (exps) {
    const int e = exps[(k / p.a_group) * p.m + m];
    for (int i = 0; i < 4; ++i) nat[i] = bf16_times_power_of_two(nat[i], e);
  }
  const Fp4LaneIndex& index = fp4_lane_index();
  for (int q = 0; q < 4; ++q) {
    const __m512i ix = index.q[q];
    const __m512i lo = _mm512_permutex2var_epi16(nat[0], ix, nat[1]);
    const __m512i hi = _mm512_permutex2var_epi16(nat[2], ix, nat[3]);
    out[q] = _mm512_mask_blend_epi16(0xFFFF0000u, lo, hi);
  }
}

}  // namespace tessera::cpu::avx512bf16
