// MLA p.v on AMX tiles: O = P . V with P as a-tiles (16 query rows x 32 tokens) and V as b-tiles (16 token
// pairs x 16 columns x 2). Both are rearranged per tile of tokens into 1 KiB tiles read with stride 64:
// - P: the softmax writes p as token pairs with query rows along the lanes ([t/2][mp][2]); a 16 x 16
//   dword transpose turns 16 pairs x 16 rows of that into one a-tile (row = query, dword j = pair j);
// - V: rows zipped into token pairs with the in-lane word unpack, as the avx512bf16 set does, so o's
//   columns come out in that set's order.
// o itself is kept in tile order between calls: the rows of each full 16-row query tile are stored as
// d_v/16 contiguous 1 KiB tiles (tile (qt, ct) at o + qt * 16 * d_v + ct * 256), so the products
// accumulate straight onto o's tiles; a last partial tile's rows stay row-major and go through c_tmp.
// mla_o_to_natural_amx restores the natural layout. Tile order beat both row-major o (rows 2 KiB apart)
// and folding stored products into o with vector FMAs; 512-token tiles were no faster per token.
// Rows whose max moved (alpha != 1; exp(0) is exactly 1) are rescaled in place before the products:
// after the first tiles of tokens, few.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/amx/mla_amx.h"
#include "backends/cpu/avx512bf16/mla_o_order.h"
#include "backends/cpu/mla_kernel_set.h"
#include "tessera/tl/runtime/transpose_blocks.h"

namespace tessera::cpu {
namespace {

// p_tiles[(qt * steps + k) * 512 ...]: a-tile of query tile qt and token step k (pairs >= `pairs` zero).
void pack_p_tiles(const uint16_t* p_pairs, int pairs, int mp, int steps, uint16_t* p_tiles) {
  const uint32_t* src = reinterpret_cast<const uint32_t*>(p_pairs);
  for (int qt = 0; qt < mp / 16; ++qt)
    for (int k = 0; k < steps; ++k) {
      __m512i r[16];
      for (int j = 0; j < 16; ++j) {
        const int pair = k * 16 + j;
        r[j] = pair < pairs ? _mm512_loadu_si512(src + int64_t(pair) * mp + qt * 16) : _mm512_setzero_si512();
      }
      tlrt::transpose16x16_d(r);
      uint16_t* dst = p_tiles + (int64_t(qt) * steps + k) * 512;
      for (int i = 0; i < 16; ++i) _mm512_store_si512(dst + 32 * i, r[i]);
    }
}

// v_pairs[ct * ct_stride + tp * 32 ...]: column tile ct (16 columns, permuted as in the avx512bf16 set),
// token pair tp; pairs past the tile's tokens are zero. A token pair's two rows are read whole, in
// order, and its 32 stores go one to each column tile; ct_stride is pairs_pad * 32 + 32 values, so
// those stores are 64 bytes off a multiple of 4 KiB apart and spread over the L1 sets.
void pack_v_pairs(const void* const* v_rows, int nt, int d_v, int pairs_pad, int64_t ct_stride, uint16_t* v_pairs) {
  for (int tp = 0; tp < pairs_pad; ++tp) {
    const int t = 2 * tp;
    const uint16_t* r0 = t < nt ? static_cast<const uint16_t*>(v_rows[t]) : nullptr;
    const uint16_t* r1 = t + 1 < nt ? static_cast<const uint16_t*>(v_rows[t + 1]) : nullptr;
    uint16_t* dst = v_pairs + int64_t(tp) * 32;
    for (int c = 0; c < d_v; c += 32, dst += 2 * ct_stride) {
      const __m512i a = r0 ? _mm512_loadu_si512(r0 + c) : _mm512_setzero_si512();
      const __m512i b = r1 ? _mm512_loadu_si512(r1 + c) : _mm512_setzero_si512();
      _mm512_store_si512(dst, _mm512_unpacklo_epi16(a, b));
      _mm512_store_si512(dst + ct_stride, _mm512_unpackhi_epi16(a, b));
    }
  }
}

// o *= alpha for the rows with alpha != 1: rows of full query tiles in tile order, the rest row-major.
void rescale_rows(const float* alpha, int m, int d_v, float* o) {
  const int full_rows = m & ~15;
  for (int r = 0; r < m; ++r) {
    if (alpha[r] == 1.0f) continue;
    const __m512 a = _mm512_set1_ps(alpha[r]);
    if (r < full_rows) {
      float* row = o + int64_t(r & ~15) * d_v + (r & 15) * 16;
      for (int ct = 0; ct < d_v / 16; ++ct)
        _mm512_storeu_ps(row + ct * 256, _mm512_mul_ps(_mm512_loadu_ps(row + ct * 256), a));
    } else {
      float* row = o + int64_t(r) * d_v;
      for (int c = 0; c < d_v; c += 16) _mm512_storeu_ps(row + c, _mm512_mul_ps(_mm512_loadu_ps(row + c), a));
    }
  }
}

// Query tiles [qt, qt + QN) x column tiles (ct, ct + 1) over all token steps, accumulated onto o's tiles
// (kOnto; written over them when fresh) or, for a partial query tile, into zeroed tiles stored to c_tmp.
template <int QN, bool kOnto>
void block(const uint16_t* p_tiles, int qt, const uint16_t* v_pairs, int ct, int steps, int64_t ct_stride, bool fresh,
           float* o, int d_v, float* c_tmp) {
  float* oc = kOnto ? o + int64_t(qt) * 16 * d_v + ct * 256 : c_tmp;
  const int64_t next_q_rows = kOnto ? int64_t(16) * d_v : 0;
  if (kOnto && !fresh) {
    _tile_loadd(0, oc, 64);
    _tile_loadd(1, oc + 256, 64);
    if (QN == 2) {
      _tile_loadd(2, oc + next_q_rows, 64);
      _tile_loadd(3, oc + next_q_rows + 256, 64);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if (QN == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  const uint16_t* a0 = p_tiles + int64_t(qt) * steps * 512;
  const uint16_t* b0 = v_pairs + int64_t(ct) * ct_stride;
  const int64_t next_q = int64_t(steps) * 512, next_c = ct_stride;
  for (int k = 0; k < steps; ++k) {
    _tile_loadd(6, b0 + k * 512, 64);
    _tile_loadd(7, b0 + next_c + k * 512, 64);
    _tile_loadd(4, a0 + k * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (QN == 2) {
      _tile_loadd(5, a0 + next_q + k * 512, 64);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, oc, 64);
  _tile_stored(1, oc + 256, 64);
  if (QN == 2) {
    _tile_stored(2, oc + next_q_rows, 64);
    _tile_stored(3, oc + next_q_rows + 256, 64);
  }
}

// Row-major rows [r0, m) (fewer than 16), columns [c, c + 32) += c_tmp's two tiles (= when fresh).
void add_partial_tile(const float* c_tmp, int r0, int m, int c, int d_v, bool fresh, float* o) {
  for (int r = 0; r < m - r0; ++r) {
    float* out = o + int64_t(r0 + r) * d_v + c;
    for (int ci = 0; ci < 2; ++ci) {
      const __m512 add = _mm512_load_ps(c_tmp + ci * 256 + r * 16);
      _mm512_storeu_ps(out + 16 * ci, fresh ? add : _mm512_add_ps(_mm512_loadu_ps(out + 16 * ci), add));
    }
  }
}

}  // namespace

int64_t mla_v_pairs_ct_stride(int nt) {
  return int64_t((nt + 31) / 32) * 16 * 32 + 32;
}

void mla_pv_amx(const void* const* v_rows, int nt, const uint16_t* p_pairs, const float* alpha, int m, int mp, int d_v,
                bool fresh, float* o, uint16_t* p_tiles, uint16_t* v_pairs, float* c_tmp,
                void (*progress)(void*, int, int), void* progress_ctx) {
  const int steps = (nt + 31) / 32, pairs_pad = steps * 16;
  const int64_t ct_stride = mla_v_pairs_ct_stride(nt);
  pack_p_tiles(p_pairs, (nt + 1) / 2, mp, steps, p_tiles);
  pack_v_pairs(v_rows, nt, d_v, pairs_pad, ct_stride, v_pairs);
  if (!fresh) rescale_rows(alpha, m, d_v, o);
  // Column pairs outside (their V tiles, 16 KiB at 256 tokens, stay in L1), query tiles inside.
  const int full = m / 16, parts = d_v / 32;
  for (int ct = 0; ct < d_v / 16; ct += 2) {
    if (progress) progress(progress_ctx, ct / 2, parts);
    int qt = 0;
    for (; qt + 2 <= full; qt += 2) block<2, true>(p_tiles, qt, v_pairs, ct, steps, ct_stride, fresh, o, d_v, c_tmp);
    if (qt < full) block<1, true>(p_tiles, qt++, v_pairs, ct, steps, ct_stride, fresh, o, d_v, c_tmp);
    if (qt * 16 < m) {
      block<1, false>(p_tiles, qt, v_pairs, ct, steps, ct_stride, fresh, o, d_v, c_tmp);
      add_partial_tile(c_tmp, qt * 16, m, ct * 16, d_v, fresh, o);
    }
  }
}

// One pass per full query tile: its 16 x d_v floats through a buffer, then each row's 32-column groups from
// the tiles (ct, ct + 1) with the avx512bf16 set's column order undone (mla_o_order.h). Rows of a partial
// last tile are row-major already and take the avx512bf16 set's pass.
void mla_o_to_natural_amx(float* o, int m, int d_v) {
  const int full = m / 16;
  if (full > 0) {
    // One 16-row buffer per thread, kept (freed with the thread).
    struct RowsBuffer {
      float* p = nullptr;
      int cols = 0;
      ~RowsBuffer() { free(p); }
    };
    static thread_local RowsBuffer buf;
    if (buf.cols < d_v) {
      free(buf.p);
      buf.p = static_cast<float*>(aligned_alloc(64, size_t(16) * d_v * 4));
      buf.cols = d_v;
    }
    float* tmp = buf.p;
    for (int qt = 0; qt < full; ++qt) {
      float* region = o + int64_t(qt) * 16 * d_v;
      memcpy(tmp, region, size_t(16) * d_v * 4);
      for (int r = 0; r < 16; ++r)
        for (int ct = 0; ct < d_v / 16; ct += 2) {
          avx512bf16::store_o_group_natural(_mm512_load_ps(tmp + ct * 256 + r * 16),
                                            _mm512_load_ps(tmp + (ct + 1) * 256 + r * 16),
                                            region + int64_t(r) * d_v + ct * 16);
        }
    }
  }
  if (m > full * 16) mla_o_to_natural_avx512bf16(o + int64_t(full) * 16 * d_v, m - full * 16, d_v);
}

}  // namespace tessera::cpu
