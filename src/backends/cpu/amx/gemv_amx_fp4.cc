// Decode GEMV over packed FP4 (e2m1) weights on AMX tiles. On AMX Xeons vdpbf16ps runs at half the fp32
// FMA rate, which held the vector FP4 GEMV (avx512bf16/gemv_fp4.cc) at 4 vdpbf16ps per 32 packed bytes
// and activation row: compute-bound at 17-23% of DRAM read with 4 rows per group, 47-50% with 1. Here
// each weight is converted to bf16 once and one tile product multiplies 16 weight rows by all M
// activation columns; the unit loop, products and folds are gemv_units.h's (shared with e4m3).
//
// Conversion: fp4_lanes.h's lane order (4 vpermw per 128 values; one scale block per 128-bit lane).
// The weight's UE8M0 scale 2^(e - 127) goes into the bf16 exponent, so the tiles accumulate over all
// of K with no per-block fold: the lookup table's exponents are raised by 126 and a saturating
// subtract (vpsubusw, no mask) takes back (253 - e) << 7 per lane, which leaves exponent
// v + e - 127 on every nonzero value (v its unscaled exponent, 126..129) and keeps zero at zero (the
// table encodes both zero codes as +0, which the saturation cannot take below 0).
//
// Range: the tile kernel takes weight-scale exponents 64 <= e <= 190 (scales 2^-63..2^63) and carries
// power-of-two activation scales 2^s with |s| <= 36 on the activations (as the vector kernel does
// with |s| <= 100): the shifts add up to at most 99, so with e4m3 activations (2^-9..448) every bf16
// weight and every product stays normal, as in the vector kernel. A call that meets another weight
// exponent returns false and the caller takes the vector kernel (1..254) or the packed GEMM; other
// activation scales are folded per activation group in fp32. tdpbf16ps, like vdpbf16ps, reads and
// writes no denormals: a product below 2^-126 counts as zero, and with the weight scale inside the
// product that threshold sits up to 2^63 away from the vector kernel's (which scales 32-value partial
// sums instead); bf16 activations that small are the only inputs where it shows. The two kernels
// round differently, each within the spec's tolerance; which one runs depends only on the problem.
#include <immintrin.h>
#include <stdint.h>

#include "backends/cpu/amx/gemv_units.h"
#include "backends/cpu/avx512bf16/fp4_lanes.h"

namespace tessera::cpu {
namespace {

using amx::Unit;

constexpr int kMinExp = 64, kMaxExp = 190;  // weight-scale exponents taken (see the top)
constexpr int kMaxActivationShift = 36;     // carried activation scales 2^s, |s| <= this
constexpr int kTableBias = 126;

// Activations as the tiles' b-operand in lane order: K step s = 4 c + q (chunk c, lane-order vector q)
// holds 16 pairs x mp columns of dwords at bt + s * 16 * mp, pair j of column mi at dword j * mp + mi.
// Zero past K and in columns m..mp-1.
void interleave_activations(const GemvFp4Args& p, int mp, int64_t k_pad, const int* exps, uint32_t* bt) {
  for (int64_t k = 0; k < k_pad; k += 128) {
    __m512i lanes[4][8];  // [q][column]
    for (int mi = 0; mi < mp; ++mi) {
      __m512i v[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
      if (mi < p.m) avx512bf16::fp4_activation_chunk_lanes(p, mi, k, exps, v);
      for (int q = 0; q < 4; ++q) lanes[q][mi] = v[q];
    }
    for (int q = 0; q < 4; ++q) amx::store_b_step(bt + (k / 32 + q) * 16 * mp, lanes[q], mp);
  }
}

// Row r of a unit: 128 values per step, each lane-order vector one K step of the staging buffer, with
// the weight scales folded in; the same row of unit `ahead` prefetched into L2.
struct Fp4Stager {
  const GemvFp4Args& p;
  const uint8_t* w;    // weight row 0 of the call (p.n0)
  const uint8_t* exp;  // its exponent row
  const __m512i table = avx512bf16::make_fp4_table(kTableBias);
  // Byte 2w of the subtrahend build takes exponent byte w / 8 (word w's lane); odd bytes stay zero.
  const __m512i lane_of_word = [] {
    alignas(64) uint8_t idx[64];
    for (int b = 0; b < 64; ++b) idx[b] = uint8_t(b / 16);
    return _mm512_load_si512(idx);
  }();
  mutable __m128i e_min = _mm_set1_epi8(char(0xFF)), e_max = _mm_setzero_si128();

  void operator()(const Unit& u, int r, uint16_t* buf, const Unit& ahead) const {
    const uint8_t* src = w + (u.row0 + r) * p.ldw;
    const uint8_t* ex = exp + (u.row0 + r) * p.exp_row_bytes;
    const uint8_t* pf = w + (ahead.row0 + r) * p.ldw + ahead.k0 / 2;
    uint16_t* out = buf + r * 32;
    for (int64_t kk = 0; kk < u.kc; kk += 128, out += 4 * 512) {
      const int64_t k = u.k0 + kk;
      if (k + 128 <= p.k) _mm_prefetch(reinterpret_cast<const char*>(pf + kk / 2), _MM_HINT_T2);
      __m512i bytes;
      uint32_t word;
      avx512bf16::fp4_weight_chunk(p, src, ex, k, &bytes, &word);
      avx512bf16::fp4_exponent_range_add(word, &e_min, &e_max);
      const __m512i e =
          _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, lane_of_word, _mm512_set1_epi32(int(word)));
      const __m512i take = _mm512_slli_epi16(_mm512_sub_epi16(_mm512_set1_epi16(kTableBias + 127), e), 7);
      __m512i v[4];
      avx512bf16::fp4x128_to_bf16_lanes(table, bytes, v);
      for (int q = 0; q < 4; ++q) _mm512_store_si512(out + q * 512, _mm512_subs_epu16(v[q], take));
    }
  }

  bool exponents_in_range() const { return avx512bf16::fp4_exponents_within(e_min, e_max, kMinExp, kMaxExp); }
};

bool gemv_fp4_amx(const GemvFp4Args& p) {
  const int mp = amx::units_columns(p.m);
  amx::configure_units(mp);
  const int64_t k_pad = (p.k + 127) / 128 * 128;
  // scratch: the activation tiles (2 * mp * k_pad bytes), then the activation-scale exponents.
  uint32_t* bt = static_cast<uint32_t*>(p.scratch);
  int* exps = avx512bf16::fp4_exponent_scratch(p, k_pad);
  const int64_t groups = p.a_scale ? (k_pad + p.a_group - 1) / p.a_group : 0;
  const bool carried = avx512bf16::fp4_pow2_activation_scales(p, groups, kMaxActivationShift, exps);
  interleave_activations(p, mp, k_pad, carried ? exps : nullptr, bt);

  GemvArgs g{};  // what the block runner reads: outputs, activation scales and groups; no weight scales
  g.m = p.m;
  g.k = p.k;
  g.a_scale = carried ? nullptr : p.a_scale;
  g.a_scale_stride = p.a_scale_stride;
  g.group = int(g.a_scale ? p.a_group : k_pad);
  g.out = p.out;
  g.ldo = p.ldo;
  g.n0 = p.n0;
  g.n1 = p.n1;
  const Fp4Stager stager{p, p.w + p.n0 * p.ldw, p.w_exp + (p.w_row0 + p.n0) * p.exp_row_bytes};
  amx::run_units(g, mp, bt, k_pad, 128, stager);
  return stager.exponents_in_range();
}

}  // namespace

GemvFp4Fn gemv_fp4_kernel_amx() {
  return gemv_fp4_amx;
}

}  // namespace tessera::cpu
