// The MQA-logits rows kernel on AMX: S = K . Q^T by tdpbf16ps, then relu / token scale / head weights
// and the head sum on the vector unit.
//
// The bf16 query panel (element (h, d) at [(d/2) * 32 * head_vectors + h * 2 + d % 2]) is already the
// b-tile layout: one b-tile is 16 d-pairs x 16 heads, rows 64 * head_vectors bytes apart. An a-tile is
// 16 key rows x 32 bf16 read in place from the key tile (row stride k_stride). A C tile is 16 keys x
// 16 heads in fp32. Tiles are blocked 2 x 2 as in the GEMM: 0-3 hold C (key half i, head tile j of the
// pair at 2i + j), 4-5 the a-tiles of keys 0-15 / 16-31, 6-7 the b-tiles of the pair's two head tiles.
// A block of 32 keys runs every head pair over all of D and stores its C tiles into an L1 buffer
// [32 keys][16 * head_vectors heads]; the epilogue then reads one key row of heads per vector.
//
// Head sum order (fixed, whatever the block): per lane, the head vectors in order (one fma chain), then
// the 16 lanes by a tree that pairs lane j with j + 8, then j + 4, j + 2, j + 1 (done for 16 keys at
// once by a transposing reduction). A key's bits never depend on its neighbours: a tail block of
// fewer than 16 keys is copied into a zeroed 16-row buffer (no read past the caller's rows), and its
// extra rows are neither scaled nor stored.
//
// Key, panel and tile shapes are the drivers' (dim 32, 64 or 128); any other even dim takes the
// vdpbf16ps set's rows kernel (AMX implies that level).
//
// Well below the tdpbf16ps peak: every C tile gets only D / 32 = 4 products before it is stored. Still
// the AMX set beat the vdpbf16ps set at every shape tried, so no problem is refused to it.
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/amx/tile_config.h"
#include "backends/cpu/avx512bf16/fp8_convert.h"
#include "backends/cpu/mqa_logits_kernels.h"

namespace tessera::cpu {
namespace {

// Every tile 16 rows x 64 bytes: tails are padded by copying, so one configuration serves all calls.
void configure() {
  amx::use_tile_config(amx::full_tile_config());
}

// 16 key rows of an a-tile: the caller's rows in place, or a zero-padded copy.
struct KeyRows {
  const uint16_t* base;
  int64_t stride_bytes;
};

// The caller's next bytes (MqaRowsArgs::prefetch), a few lines before each d-step of the tiles: a paged
// cache's next page sits at a random place, and one burst of ~130 prefetches before a page held the
// core until the fill buffers drained, so the page was fetched while nothing else ran.
struct Prefetcher {
  const char* next;
  const char* end;
  int64_t per_step;  // lines
  void issue() {
    for (int64_t i = 0; i < per_step && next < end; ++i, next += 64) _mm_prefetch(next, _MM_HINT_T1);
  }
};

// C tiles of KT key tiles x NT head tiles (head tiles h0, h0 + 1) over all `steps` d-steps of 32,
// stored into c (row stride c_stride floats) at key row 16 * i, head 16 * (h0 + j).
template <int KT, int NT>
inline void tile_block(const uint16_t* panel, int64_t panel_stride_bytes, int h0, const KeyRows* keys, int steps,
                       float* c, int64_t c_stride, Prefetcher* pf) {
  _tile_zero(0);
  if (NT == 2) _tile_zero(1);
  if (KT == 2) {
    _tile_zero(2);
    if (NT == 2) _tile_zero(3);
  }
  const int64_t pair_row = panel_stride_bytes / 2;  // elements of one d-pair row of the panel
  for (int s = 0; s < steps; ++s) {
    pf->issue();
    const uint16_t* b = panel + int64_t(s) * 16 * pair_row + 32 * h0;
    _tile_loadd(6, b, panel_stride_bytes);
    if (NT == 2) _tile_loadd(7, b + 32, panel_stride_bytes);
    _tile_loadd(4, keys[0].base + 32 * s, keys[0].stride_bytes);
    _tile_dpbf16ps(0, 4, 6);
    if (NT == 2) _tile_dpbf16ps(1, 4, 7);
    if (KT == 2) {
      _tile_loadd(5, keys[1].base + 32 * s, keys[1].stride_bytes);
      _tile_dpbf16ps(2, 5, 6);
      if (NT == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  const int64_t cs = c_stride * 4;
  float* c0 = c + 16 * h0;
  _tile_stored(0, c0, cs);
  if (NT == 2) _tile_stored(1, c0 + 16, cs);
  if (KT == 2) {
    _tile_stored(2, c0 + 16 * c_stride, cs);
    if (NT == 2) _tile_stored(3, c0 + 16 * c_stride + 16, cs);
  }
}

// v[r] -> one vector whose lane r is the sum of v[r]'s 16 lanes (the tree in the header comment).
inline __m512 sum_lanes_16(__m512* v) {
  __m512 u[8], w[4], z[2];
  for (int i = 0; i < 8; ++i)  // lanes j + j+8: u[i] = [key i (8 lanes), key i+8 (8 lanes)]
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 8], 0x44), _mm512_shuffle_f32x4(v[i], v[i + 8], 0xEE));
  for (int i = 0; i < 4; ++i)  // + j+4: w[i] blocks = keys i, i+8, i+4, i+12
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[i], u[i + 4], 0x88), _mm512_shuffle_f32x4(u[i], u[i + 4], 0xDD));
  for (int i = 0; i < 2; ++i) {  // + j+2: per block [key of w[i] x2, key of w[i+2] x2]
    const __m512d a = _mm512_castps_pd(w[i]), b = _mm512_castps_pd(w[i + 2]);
    z[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // + j+1: lanes hold keys 0 2 1 3 | 8 10 9 11 | 4 6 5 7 | 12 14 13 15.
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x88), _mm512_shuffle_ps(z[0], z[1], 0xDD));
  const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
  return _mm512_permutexvar_ps(order, r);
}

// Logits of n (1..16) keys from their C rows (row stride c_stride floats). A key whose scale is
// finite and >= 0 takes it out of the head sum (relu(s * x) = s * relu(x)): s * sum_h w_h * relu(x_h),
// two vector ops a head vector instead of three. Any other scale (negative, infinite, NaN) is applied
// to each head as written in the interface. The choice depends on the key's own scale only.
template <int HV>
inline void logits_16(const float* c, int64_t c_stride, const float* weights, __mmask16 last_mask, const float* k_scale,
                      int n, float* out) {
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 keys = __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1);
  const __m512 scale = _mm512_maskz_loadu_ps(keys, k_scale);
  const __mmask16 factored = _mm512_cmp_ps_mask(scale, zero, _CMP_GE_OQ) &
                             _mm512_cmp_ps_mask(scale, _mm512_set1_ps(INFINITY), _CMP_LT_OQ) & keys;
  __m512 w[HV];
  for (int v = 0; v < HV; ++v)
    w[v] = _mm512_maskz_loadu_ps(v == HV - 1 ? last_mask : __mmask16(0xFFFF), weights + 16 * v);
  __m512 acc[16];
  for (int r = 0; r < 16; ++r) {
    acc[r] = zero;
    if (r >= n) continue;
    const float* row = c + r * c_stride;
    if (factored >> r & 1) {
      for (int v = 0; v < HV; ++v) {
        const __mmask16 m = v == HV - 1 ? last_mask : __mmask16(0xFFFF);
        acc[r] = _mm512_fmadd_ps(_mm512_max_ps(zero, _mm512_maskz_load_ps(m, row + 16 * v)), w[v], acc[r]);
      }
      continue;
    }
    const __m512 s = _mm512_set1_ps(k_scale[r]);
    for (int v = 0; v < HV; ++v) {
      const __mmask16 m = v == HV - 1 ? last_mask : __mmask16(0xFFFF);
      const __m512 x = _mm512_max_ps(zero, _mm512_maskz_mul_ps(m, _mm512_load_ps(row + 16 * v), s));  // NaN passes
      acc[r] = _mm512_fmadd_ps(x, w[v], acc[r]);
    }
  }
  const __m512 factor = _mm512_mask_blend_ps(factored, _mm512_set1_ps(1.0f), scale);
  _mm512_mask_storeu_ps(out, keys, _mm512_mul_ps(sum_lanes_16(acc), factor));
}

// The C tiles of keys [k0, k0 + n) (n <= 32) against every head, stored into c.
template <int HV>
inline void key_block(const MqaRowsArgs& a, int k0, int n, uint16_t* pad, float* c, Prefetcher* pf) {
  constexpr int kHeadCols = 16 * HV;
  const uint16_t* panel = static_cast<const uint16_t*>(a.q_panel);
  const int kt = n > 16 ? 2 : 1;
  KeyRows keys[2];
  for (int i = 0; i < kt; ++i) {
    const uint16_t* first = static_cast<const uint16_t*>(a.k) + (k0 + 16 * i) * a.k_stride;
    const int have = n - 16 * i;
    if (have >= 16) {
      keys[i] = {first, a.k_stride * 2};
      continue;
    }
    // Whole vectors (dim is a multiple of 32): 16 rows of memcpy / memset calls took ~150 ns.
    for (int r = 0; r < 16; ++r)
      for (int d = 0; d < a.dim; d += 32)
        _mm512_store_si512(pad + r * a.dim + d,
                           r < have ? _mm512_loadu_si512(first + r * a.k_stride + d) : _mm512_setzero_si512());
    keys[i] = {pad, int64_t(a.dim) * 2};
  }
  const int steps = a.dim / 32;
  int h = 0;
  for (; h + 2 <= HV; h += 2) {
    if (kt == 2) {
      tile_block<2, 2>(panel, 64 * HV, h, keys, steps, c, kHeadCols, pf);
    } else {
      tile_block<1, 2>(panel, 64 * HV, h, keys, steps, c, kHeadCols, pf);
    }
  }
  if (h < HV) {
    if (kt == 2) {
      tile_block<2, 1>(panel, 64 * HV, h, keys, steps, c, kHeadCols, pf);
    } else {
      tile_block<1, 1>(panel, 64 * HV, h, keys, steps, c, kHeadCols, pf);
    }
  }
}

// Logits of keys [k0, k0 + n) from their scores in c.
template <int HV>
inline void block_logits(const MqaRowsArgs& a, int k0, int n, __mmask16 last_mask, const float* c) {
  constexpr int kHeadCols = 16 * HV;
  for (int i = 0; 16 * i < n; ++i) {
    const int have = n - 16 * i < 16 ? n - 16 * i : 16;
    logits_16<HV>(c + 16 * i * kHeadCols, kHeadCols, a.weights, last_mask, a.k_scale + k0 + 16 * i, have,
                  a.out + k0 + 16 * i);
  }
}

// Blocks of 32 keys: tiles, then the epilogue. (Issuing block j's tiles before block j - 1's epilogue,
// from two score buffers, or the epilogue's 16-key groups in between the head pairs, was no faster: the
// vector work did not overlap the tile products. Nor did staggering two sets of 16 x 32 C tiles half a
// D-chain apart, so that one set's last products and store overlap the other's.)
template <int HV>
void rows_amx(const MqaRowsArgs& a) {
  configure();
  alignas(64) float c[32 * 16 * HV];   // one key block's scores, <= 16 KiB
  alignas(64) uint16_t pad[16 * 128];  // a tail key tile, zero-padded to 16 rows
  const int last = a.heads - 16 * (HV - 1);
  const __mmask16 last_mask = last >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << last) - 1);
  const char* pf_end = static_cast<const char*>(a.prefetch) + (a.prefetch ? a.prefetch_bytes : 0);
  const char* pf_begin = static_cast<const char*>(a.prefetch) - (reinterpret_cast<uintptr_t>(a.prefetch) & 63);
  const int64_t lines = (pf_end - pf_begin + 63) / 64;
  const int64_t steps = (a.rows + 31) / 32 * ((HV + 1) / 2) * (a.dim / 32) + 1;  // d-steps of this call, + 1
  Prefetcher pf{pf_begin, pf_end, (lines + steps - 1) / steps};
  for (int k0 = 0; k0 < a.rows; k0 += 32) {
    const int n = a.rows - k0 < 32 ? a.rows - k0 : 32;
    key_block<HV>(a, k0, n, pad, c, &pf);
    block_logits<HV>(a, k0, n, last_mask, c);
  }
}

void rows(const MqaRowsArgs& a) {
  if (a.dim % 32 != 0 || a.dim > 128) return mqa_kernels_avx512bf16()->rows(a);
  switch (a.head_vectors) {
    case 1:
      return rows_amx<1>(a);
    case 2:
      return rows_amx<2>(a);
    case 3:
      return rows_amx<3>(a);
    case 4:
      return rows_amx<4>(a);
    case 5:
      return rows_amx<5>(a);
    case 6:
      return rows_amx<6>(a);
    case 7:
      return rows_amx<7>(a);
    default:
      return rows_amx<8>(a);
  }
}

// The bf16 panel layout of mqa_pack_query_bf16 (scalar/mqa_logits.cc), built with gathers: panel row p
// (a pair of D) of head vector v is the dword p of heads 16v..16v+15. The plain C loop took ~9% of a
// 512 x 2048 prefill on this set.
void pack_query(const uint16_t* q_bf16, int heads, int dim, void* panel) {
  const int hv = (heads + 15) / 16, pairs = dim / 2;
  int32_t* out = static_cast<int32_t*>(panel);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int v = 0; v < hv; ++v) {
    const int left = heads - 16 * v;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);  // padded heads: zero
    const __m512i row = _mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(16 * v)), _mm512_set1_epi32(pairs));
    for (int p = 0; p < pairs; ++p) {
      const __m512i idx = _mm512_add_epi32(row, _mm512_set1_epi32(p));
      _mm512_storeu_si512(out + p * 16 * hv + 16 * v,
                          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, q_bf16, 4));
    }
  }
}

// float8_e4m3fn keys -> bf16 by arithmetic where a block of 64 codes has only normal finite values
// (avx512bf16::store_normal_e4m3x64); blocks with zeros, subnormals or NaN take the table lookups.
// With per-token scales (amax / 448) such codes are rare. Paged decode converts each page for one or
// two queries, so conversion counts there.
void e4m3_keys(const uint8_t* src, int64_t n, void* dst_void) {
  uint16_t* dst = static_cast<uint16_t*>(dst_void);
  const avx512bf16::E4m3Tables& t = avx512bf16::e4m3_tables();
  const __m512i bias = avx512bf16::e4m3_normal_bias(0);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i x = _mm512_loadu_si512(src + i);
    if (avx512bf16::store_normal_e4m3x64(x, bias, dst + i)) continue;
    __m512i lo, hi;
    avx512bf16::e4m3x64_to_bf16(t, x, &lo, &hi);
    _mm512_storeu_si512(dst + i, lo);
    _mm512_storeu_si512(dst + i + 32, hi);
  }
  if (i < n) mqa_kernels_avx512bf16()->e4m3_keys(src + i, n - i, dst + i);
}

}  // namespace

// Panel size and MX keys are the vdpbf16ps set's: same bf16 layouts; FP8 keys convert alike, faster.
const MqaLogitsKernels* mqa_kernels_amx() {
  static const MqaLogitsKernels set = [] {
    MqaLogitsKernels s = *mqa_kernels_avx512bf16();
    s.name = "mqa_amx";
    s.pack_query = pack_query;
    s.rows = rows;
    s.e4m3_keys = e4m3_keys;
    s.rows_prefetch = true;
    // Whole blocks of 32 keys (a tail block is copied and padded), and the FP8 key conversion shared
    // by more queries: it took 15% of a prefill call at 4; 8 queries x 128 rows was among the fastest
    // shapes tried.
    s.tile_rows = 128;
    s.query_block = 8;
    return s;
  }();
  return &set;
}

}  // namespace tessera::cpu
