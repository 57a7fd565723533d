// MX key rows (FP8 or FP4 values, one UE8M0 exponent per 32) -> bf16 tiles for the vdpbf16ps and AMX
// MQA-logits sets. Codes become bf16 by table lookups (exact), and the block's power of two is added to
// the exponent field of every finite nonzero value: the bits of rounding value * 2^(e - 127) to bf16
// whenever every product stays a normal bf16. Blocks whose exponent could leave that range (or is the
// NaN exponent 0xFF) take the plain-C conversion, so the result is the scalar set's bit for bit.
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/mqa_logits_kernels.h"

namespace tessera::cpu {
namespace {

// UE8M0 exponents that keep every nonzero product normal in bf16: e4m3 magnitudes lie in [2^-9, 448],
// e2m1 ones in [0.5, 6].
constexpr int kFp8ExponentMin = 10, kFp8ExponentMax = 246;
constexpr int kFp4ExponentMin = 2, kFp4ExponentMax = 252;

// vpermw table: entry i holds the bf16 bits of e2m1 code i & 15 (entries 16-31 repeat 0-15, so a lane's
// bit 4 is ignored); code 8 is -0.
__m512i fp4_bf16_table() {
  static const uint16_t kBits[8] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0};
  alignas(64) uint16_t table[32];
  for (int i = 0; i < 32; ++i) table[i] = uint16_t(kBits[i & 7] | ((i & 8) ? 0x8000 : 0));
  return _mm512_load_si512(table);
}

// Word d of the result holds value d of a 32-value FP4 block (16 bytes; low nibble = even d) in its
// low 4 bits: vpermb spreads byte d / 2 to word d, and odd words shift right by 4.
inline __m512i fp4x32_nibble_words(const uint8_t* src) {
  alignas(64) static const uint8_t kSpread[64] = {0,  64, 0,  64, 1,  64, 1,  64, 2,  64, 2,  64, 3,  64, 3,  64,
                                                  4,  64, 4,  64, 5,  64, 5,  64, 6,  64, 6,  64, 7,  64, 7,  64,
                                                  8,  64, 8,  64, 9,  64, 9,  64, 10, 64, 10, 64, 11, 64, 11, 64,
                                                  12, 64, 12, 64, 13, 64, 13, 64, 14, 64, 14, 64, 15, 64, 15, 64};
  alignas(64) static const uint16_t kShift[32] = {0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4,
                                                  0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4};
  const __m512i bytes = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  // Index 64 (bit 6 set) selects from the second source: zero high bytes.
  const __m512i words = _mm512_permutex2var_epi8(bytes, _mm512_load_si512(kSpread), _mm512_setzero_si512());
  return _mm512_srlv_epi16(words, _mm512_load_si512(kShift));
}

// One 32-value block through the plain-C conversion (exponent byte e; dst: 32 bf16).
void block_plain(const uint8_t* values, bool fp4, uint8_t e, uint16_t* dst) {
  const uint32_t word = e;
  uint8_t scales[4];
  memcpy(scales, &word, 4);
  mqa_mx_keys_bf16({values, 0, scales, 0, 1, 32, fp4, dst});
}

void mx_keys(const MqaMxKeyArgs& a) {
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  const __m512i fp4_table = fp4_bf16_table();
  const int lo = a.fp4 ? kFp4ExponentMin : kFp8ExponentMin, hi = a.fp4 ? kFp4ExponentMax : kFp8ExponentMax;
  for (int r = 0; r < a.rows; ++r) {
    uint8_t e[4];
    memcpy(e, a.scales + r * a.scales_stride, 4);
    const uint8_t* row = a.values + r * a.values_stride;
    uint16_t* out = static_cast<uint16_t*>(a.dst) + int64_t(r) * a.dim;
    for (int d0 = 0; d0 < a.dim; d0 += 32) {  // dim is a multiple of 32
      const int b = d0 / 32;
      const uint8_t* src = row + (a.fp4 ? d0 / 2 : d0);
      if (e[b] < lo || e[b] > hi) {
        block_plain(src, a.fp4, e[b], out + d0);
        continue;
      }
      __m512i v;
      if (a.fp4) {
        v = _mm512_permutexvar_epi16(fp4x32_nibble_words(src), fp4_table);
      } else {
        __m512i unused;
        avx512bf16::e4m3x64_to_bf16(
            t, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))), &v, &unused);
      }
      _mm512_storeu_si512(out + d0, avx512bf16::bf16_times_power_of_two(v, int(e[b]) - 127));
    }
  }
}

}  // namespace

void mqa_mx_keys_avx512bf16(const MqaMxKeyArgs& args) {
  mx_keys(args);
}

}  // namespace tessera::cpu
