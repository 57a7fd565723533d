// Decode GEMV over e4m3 weights on AMX tiles: each weight element is converted to bf16 once, by the
// vector unit, and multiplied by all M activation columns in one tile product. The unit loop, tile
// products and folds are gemv_units.h's (shared with the FP4 kernel); this file converts and prefetches.
//
// Each row's piece of the unit kPrefetchUnits later is prefetched as the row is converted: 16 rows
// side by side in short pieces are too many streams for the hardware prefetcher; 2 units ahead was the
// best distance tried. The lines go to L2, not L1: two units of weights in L1 beside the two 16 KiB
// staging buffers evicted those, and from DRAM the L2 hint read faster.
//
// Why not the 48-row tile GEMV of gemv_amx.cc for e4m3: it staged 48 rows x 1024 values in natural
// order (96 KiB: L2) with the 4-permute conversion, after which the tiles ran; M=5..8 were slower than
// this kernel, and M <= 4 stayed on the vector GEMV, which vdpbf16ps (half the fp32 FMA rate on AMX
// Xeons) holds below this kernel's rate.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
//
// Conversion is the vector GEMV's "lane order" lookup (fp8_convert.h): 64 e4m3 values become two bf16
// vectors whose K pairs are permuted within the 64-block; the activations are interleaved in the same
// order, so every product pair is the right one.
#include "backends/cpu/amx/gemv_amx_e4m3.h"

#include <immintrin.h>
#include <stdint.h>

#include "backends/cpu/amx/gemv_units.h"
#include "backends/cpu/avx512bf16/fp8_convert.h"

namespace tessera::cpu::amx {
namespace {

// Activation rows (e4m3) as the tiles' b-operand in lane order: for K step s, 16 pairs x mp columns of
// dwords at bt + s * 16 * mp, pair q of column mi at dword q * mp + mi. Zero past K up to k_pad (a
// multiple of 64) and in columns m..mp-1.
void interleave_activations(const GemvArgs& p, int mp, int64_t k_pad, uint32_t* bt) {
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  for (int64_t k = 0; k < k_pad; k += 64) {
    __m512i even[8], odd[8];
    for (int mi = 0; mi < mp; ++mi) {
      const char* row = static_cast<const char*>(p.a) + mi * p.a_stride;
      const int64_t left = mi < p.m ? p.k - k : 0;
      const __mmask64 valid = left >= 64 ? ~0ull : left <= 0 ? 0ull : (1ull << left) - 1;
      avx512bf16::e4m3x64_to_bf16_lanes(t, _mm512_maskz_loadu_epi8(valid, row + k), &even[mi], &odd[mi]);
    }
    uint32_t* step = bt + (k / 32) * 16 * mp;
    store_b_step(step, even, mp);
    store_b_step(step + 16 * mp, odd, mp);
  }
}

// One weight row's K range [k0, k0 + kc) (kc a multiple of 64) converted into row r of a tile-order
// staging buffer (step s at dst + s * 512 values); zeros past K.
inline void stage_row(const avx512bf16::E4m3Tables& t, const char* row, int64_t k, int64_t k0, int64_t kc, int r,
                      uint16_t* dst, const char* pf) {
  uint16_t* out = dst + r * 32;
  const char* src = row + k0;
  const int64_t full = k - k0 >= kc ? kc : (k - k0) / 64 * 64;
  __m512i even, odd;
  int64_t kk = 0;
  for (; kk < full; kk += 64, out += 1024) {
    _mm_prefetch(pf + kk, _MM_HINT_T2);
    avx512bf16::e4m3x64_to_bf16_lanes(t, _mm512_loadu_si512(src + kk), &even, &odd);
    _mm512_store_si512(out, even);
    _mm512_store_si512(out + 512, odd);
  }
  for (; kk < kc; kk += 64, out += 1024) {  // the K tail, then zeros
    const int64_t left = k - (k0 + kk);
    const __mmask64 valid = left <= 0 ? 0ull : left >= 64 ? ~0ull : (1ull << left) - 1;
    avx512bf16::e4m3x64_to_bf16_lanes(t, _mm512_maskz_loadu_epi8(valid, src + kk), &even, &odd);
    _mm512_store_si512(out, even);
    _mm512_store_si512(out + 512, odd);
  }
}

// Row r of a unit: its piece converted into the staging buffer, the same row of unit `ahead` prefetched.
struct E4m3Stager {
  const GemvArgs& p;
  const avx512bf16::E4m3Tables tables = avx512bf16::e4m3_tables();
  void operator()(const Unit& u, int r, uint16_t* buf, const Unit& ahead) const {
    const char* row = static_cast<const char*>(p.w) + (u.row0 + r) * p.ldw;
    const char* pf = static_cast<const char*>(p.w) + (ahead.row0 + r) * p.ldw + ahead.k0;
    stage_row(tables, row, p.k, u.k0, u.kc, r, buf, pf);
  }
};

}  // namespace

void gemv_e4m3(const GemvArgs& p) {
  const int mp = units_columns(p.m);
  configure_units(mp);
  const int64_t k_pad = (p.k + 63) / 64 * 64;
  uint32_t* bt = static_cast<uint32_t*>(p.scratch);
  interleave_activations(p, mp, k_pad, bt);

  GemvArgs q = p;  // rows relative to n0 from here on
  q.w = static_cast<const char*>(p.w) + p.n0 * p.ldw;
  run_units(q, mp, bt, k_pad, 64, E4m3Stager{q});
}

}  // namespace tessera::cpu::amx
