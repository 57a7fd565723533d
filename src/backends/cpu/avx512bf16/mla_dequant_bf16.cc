// FP8 KV-cache tokens -> bf16 K rows for the avx512bf16 MLA set (layouts: FlashMLA's API, docs/attention.md).
// Every e4m3 value is a bf16 value, so 64 bytes become 64 bf16 with two byte-table lookups. The tile scale
// is then applied exactly: for a power of two 2^k that keeps every result normal (the quantiser's scales
// and every UE8M0 scale in range) it is an integer add of k to the bf16 exponent of the non-zero,
// non-NaN values; any other fp32 scale goes through fp32 (e4m3 * s, rounded to nearest even bf16; the
// bf16 conversion flushes subnormal results to zero).
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/mla_kernel_set.h"

namespace tessera::cpu {
namespace {

inline __m512i scale_bf16_fp32(__m512i v, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  const __m512 lo = _mm512_mul_ps(_mm512_cvtpbh_ps((__m256bh)_mm512_castsi512_si256(v)), s);
  const __m512 hi = _mm512_mul_ps(_mm512_cvtpbh_ps((__m256bh)_mm512_extracti64x4_epi64(v, 1)), s);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// n64 x 64 e4m3 values at src sharing one scale -> bf16 at dst (natural order). The scale test and the
// tables are hoisted out of the 64-value steps (a V32 token has four 128-value blocks).
inline void dequant_block(const avx512bf16::E4m3Tables& t, const uint8_t* src, int n64, float scale, uint16_t* dst) {
  int k = 0;
  // Exact by exponent adds when scale is 2^k with every scaled e4m3 magnitude ([2^-9, 448]) a normal bf16.
  if (scalar_convert::power_of_two_exponent(scale, -116, 118, &k)) {
    const __m512i bias = avx512bf16::e4m3_normal_bias(k);
    for (int i = 0; i < n64; ++i) {
      const __m512i x = _mm512_loadu_si512(src + 64 * i);
      if (avx512bf16::store_normal_e4m3x64(x, bias, dst + 64 * i)) continue;  // nearly every block of real caches
      __m512i v0, v1;
      avx512bf16::e4m3x64_to_bf16(t, x, &v0, &v1);
      _mm512_storeu_si512(dst + 64 * i, avx512bf16::bf16_times_power_of_two(v0, k));
      _mm512_storeu_si512(dst + 64 * i + 32, avx512bf16::bf16_times_power_of_two(v1, k));
    }
    return;
  }
  for (int i = 0; i < n64; ++i) {
    __m512i v0, v1;
    avx512bf16::e4m3x64_to_bf16(t, _mm512_loadu_si512(src + 64 * i), &v0, &v1);
    _mm512_storeu_si512(dst + 64 * i, scale_bf16_fp32(v0, scale));
    _mm512_storeu_si512(dst + 64 * i + 32, scale_bf16_fp32(v1, scale));
  }
}

}  // namespace

void mla_dequant_v32_avx512bf16(const uint8_t* token, void* row) {
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  uint16_t* out = static_cast<uint16_t*>(row);
  float scales[4];
  memcpy(scales, token + 512, sizeof(scales));
  for (int b = 0; b < 4; ++b) dequant_block(t, token + 128 * b, 2, scales[b], out + 128 * b);
  _mm512_storeu_si512(out + 512, _mm512_loadu_si512(token + 528));
  _mm512_storeu_si512(out + 544, _mm512_loadu_si512(token + 592));
}

void mla_dequant_model1_avx512bf16(const uint8_t* data, const uint8_t* scales, void* row) {
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  uint16_t* out = static_cast<uint16_t*>(row);
  for (int c = 0; c < 7; ++c) {
    const uint32_t bits = scales[c] == 0 ? 0x00400000u : uint32_t(scales[c]) << 23;  // UE8M0 -> fp32
    float s;
    memcpy(&s, &bits, 4);
    if (scales[c] == 0xFF) s = __builtin_nanf("");
    dequant_block(t, data + 64 * c, 1, s, out + 64 * c);
  }
  _mm512_storeu_si512(out + 448, _mm512_loadu_si512(data + 448));
  _mm512_storeu_si512(out + 480, _mm512_loadu_si512(data + 512));
}

}  // namespace tessera::cpu
