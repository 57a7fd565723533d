// p.v for the avx512bf16 MLA set: o[r][:] = o[r][:] * alpha[r] + sum_t p[t][r] * v_t.
// V rows are first zipped into token pairs ([t/2][d_v][2], the vdpbf16ps vector layout, columns permuted
// within 32-column groups by the in-lane unpack), then a 6-row x 64-column register tile (24 accumulators) streams over
// the token pairs with p pairs as dword broadcasts. The rescale by alpha happens when the tile is loaded, so o is read
// and written once per tile of tokens. Column blocks are the outer loop so their V pairs stay in L1 while the row
// blocks stream them.
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/avx512bf16/mla_o_order.h"
#include "backends/cpu/mla_kernel_set.h"

namespace tessera::cpu {
namespace {

// Columns [c0, c0 + 16*NV) of the V rows as token pairs, v_pack[tp][16*NV][2], using the in-lane word
// unpack: the vector for columns [c, c+16) of a 32-column group holds c + {0-3, 8-11, 16-19, 24-27} and the
// one for [c+16, c+32) holds c + {4-7, 12-15, 20-23, 28-31}. o inherits that order; o_to_natural restores
// it once per unit.
template <int NV>
void pack_v_pairs(const void* const* k_rows, int nt, int c0, uint16_t* v_pack) {
  for (int t = 0; t < nt; t += 2) {
    const uint16_t* r0 = static_cast<const uint16_t*>(k_rows[t]) + c0;
    const uint16_t* r1 = t + 1 < nt ? static_cast<const uint16_t*>(k_rows[t + 1]) + c0 : nullptr;
    uint16_t* dst = v_pack + int64_t(t / 2) * NV * 32;
#pragma GCC unroll 2
    for (int c = 0; c < NV * 16; c += 32) {
      const __m512i a = _mm512_loadu_si512(r0 + c);
      const __m512i b = r1 ? _mm512_loadu_si512(r1 + c) : _mm512_setzero_si512();
      _mm512_storeu_si512(dst + 2 * c, _mm512_unpacklo_epi16(a, b));
      _mm512_storeu_si512(dst + 2 * c + 32, _mm512_unpackhi_epi16(a, b));
    }
  }
}

template <int MR, int NV>
void pv_block(const uint16_t* p, int64_t p_step, const uint16_t* v, int64_t v_step, int pairs, const float* alpha,
              float* o, int ldo) {
  __m512 acc[MR][NV];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_mul_ps(_mm512_loadu_ps(o + r * ldo + 16 * j), a);
  }
  for (int tp = 0; tp < pairs; ++tp) {
    __m512bh b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) b[j] = (__m512bh)_mm512_loadu_si512(v + tp * v_step + 32 * j);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      memcpy(&pair, p + tp * p_step + 2 * r, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], av, b[j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) _mm512_storeu_ps(o + r * ldo + 16 * j, acc[r][j]);
}

// One column block (NV vectors at column c0) for every row: its V pairs are packed into an L1-sized
// buffer (pairs x NV x 64 bytes, 12 KiB for a full tile), then 6-row tiles and the row tail stream it.
// progress(ctx, part, parts) runs before each 6-row tile: part = first + tile index.
struct Progress {
  void (*fn)(void*, int, int);
  void* ctx;
  int parts;
};

template <int NV>
void pv_columns(const void* const* k_rows, int nt, const uint16_t* p_pairs, int m, int mp, int c0, int d_v,
                const float* alpha, float* o, uint16_t* v_pack, const Progress& pr, int first) {
  pack_v_pairs<NV>(k_rows, nt, c0, v_pack);
  const int pairs = (nt + 1) / 2;
  const int64_t p_step = int64_t(mp) * 2, v_step = NV * 32;
  o += c0;
  int r = 0;
  for (; r + 6 <= m; r += 6) {
    if (pr.fn) pr.fn(pr.ctx, first + r / 6, pr.parts);
    pv_block<6, NV>(p_pairs + 2 * r, p_step, v_pack, v_step, pairs, alpha + r, o + int64_t(r) * d_v, d_v);
  }
  const uint16_t* p = p_pairs + 2 * r;
  float* orow = o + int64_t(r) * d_v;
  switch (m - r) {
    case 5:
      pv_block<5, NV>(p, p_step, v_pack, v_step, pairs, alpha + r, orow, d_v);
      break;
    case 4:
      pv_block<4, NV>(p, p_step, v_pack, v_step, pairs, alpha + r, orow, d_v);
      break;
    case 3:
      pv_block<3, NV>(p, p_step, v_pack, v_step, pairs, alpha + r, orow, d_v);
      break;
    case 2:
      pv_block<2, NV>(p, p_step, v_pack, v_step, pairs, alpha + r, orow, d_v);
      break;
    case 1:
      pv_block<1, NV>(p, p_step, v_pack, v_step, pairs, alpha + r, orow, d_v);
      break;
    default:
      break;
  }
}

}  // namespace

void mla_o_to_natural_avx512bf16(float* o, int m, int d_v) {
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < d_v; c += 32) {
      float* p = o + int64_t(r) * d_v + c;
      avx512bf16::store_o_group_natural(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16), p);
    }
}

void mla_pv_avx512bf16(const void* const* v_rows, int nt, const uint16_t* p_pairs, const float* alpha, int m, int mp,
                       int d_v, float* o, uint16_t* v_pack, void (*progress)(void*, int, int), void* progress_ctx) {
  const int blocks = (d_v + 63) / 64, tiles = m / 6;
  const Progress pr{tiles > 0 ? progress : nullptr, progress_ctx, blocks * tiles};
  for (int blk = 0, c = 0; blk < blocks; ++blk, c += 64) {
    if (c + 64 <= d_v) {
      pv_columns<4>(v_rows, nt, p_pairs, m, mp, c, d_v, alpha, o, v_pack, pr, blk * tiles);
    } else {
      pv_columns<2>(v_rows, nt, p_pairs, m, mp, c, d_v, alpha, o, v_pack, pr, blk * tiles);
    }
  }
  if (tiles == 0 && progress) progress(progress_ctx, 0, 1);
}

}  // namespace tessera::cpu
