// MLA scores on AMX tiles: S^T = K . Q^T, so the result has the avx512bf16 set's layout (tokens as rows,
// query rows along the 16 lanes) and its softmax runs unchanged. a-tiles are 16 K rows x 32 values, read
// in place when the group's row pointers are evenly spaced (the dequantised tile buffer, a paged cache's
// block); b-tiles are the queries packed in tile order: per 16 query rows and 32 values one contiguous
// 1 KiB tile of 16 K pairs x 16 rows x 2 (the avx512bf16 layout [d/2][mp][2] holds the same tiles with a
// row stride of mp * 4 bytes, whose 16 rows share few L1 sets).
// A register block is 2 token tiles x 2 query tiles (4 products per 4 tile loads); an odd last query tile
// uses 2 x 1. Operands must be 64-byte aligned rows: split lines cost a third of the time.
#include <immintrin.h>
#include <string.h>

#include "backends/cpu/amx/mla_amx.h"

namespace tessera::cpu {
namespace {

struct Group {
  const char* base;  // row 0 of the group
  int64_t stride;    // bytes between rows
};

// Group g's 16 rows: in place when evenly spaced, else copied (rows >= nt as zeros) into k_stage.
Group group_rows(const void* const* k_rows, int nt, int g, int d_qk, uint16_t* k_stage) {
  const int t0 = g * 16;
  const int64_t row_bytes = int64_t(d_qk) * 2;
  if (t0 + 16 <= nt) {
    const char* r0 = static_cast<const char*>(k_rows[t0]);
    const int64_t stride = static_cast<const char*>(k_rows[t0 + 1]) - r0;
    bool even = stride != 0;
    for (int i = 2; i < 16 && even; ++i) even = static_cast<const char*>(k_rows[t0 + i]) == r0 + i * stride;
    if (even) return {r0, stride};
  }
  uint16_t* dst = k_stage + int64_t(t0) * d_qk;
  for (int i = 0; i < 16; ++i) {
    if (t0 + i < nt) {
      memcpy(dst + int64_t(i) * d_qk, k_rows[t0 + i], size_t(row_bytes));
    } else {
      memset(dst + int64_t(i) * d_qk, 0, size_t(row_bytes));
    }
  }
  return {reinterpret_cast<const char*>(dst), row_bytes};
}

// Tokens of groups (a, b) x query tiles [c, c + 16 * QN), K steps [k0, k1): tiles 0-3 = (group, query
// tile) products, started from zero (first) or from s; 4-5 the K tiles, 6-7 the q tiles.
template <int QN>
void block(Group a, Group b, const uint16_t* q, int ksteps, int k0, int k1, bool first, float* s, int64_t s_stride,
           int64_t group_offset) {
  const uint16_t* q1 = q + int64_t(ksteps) * 512;  // the next query tile
  if (first) {
    _tile_zero(0);
    if (QN == 2) _tile_zero(1);
    _tile_zero(2);
    if (QN == 2) _tile_zero(3);
  } else {
    _tile_loadd(0, s, s_stride);
    if (QN == 2) _tile_loadd(1, s + 16, s_stride);
    _tile_loadd(2, s + group_offset, s_stride);
    if (QN == 2) _tile_loadd(3, s + group_offset + 16, s_stride);
  }
  for (int k = k0; k < k1; ++k) {
    _tile_loadd(6, q + k * 512, 64);
    if (QN == 2) _tile_loadd(7, q1 + k * 512, 64);
    _tile_loadd(4, a.base + k * 64, a.stride);
    _tile_loadd(5, b.base + k * 64, b.stride);
    _tile_dpbf16ps(0, 4, 6);
    if (QN == 2) _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    if (QN == 2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, s, s_stride);
  if (QN == 2) _tile_stored(1, s + 16, s_stride);
  _tile_stored(2, s + group_offset, s_stride);
  if (QN == 2) _tile_stored(3, s + group_offset + 16, s_stride);
}

}  // namespace

// Element (row c, k) at ((c/16) * (d_qk/32) + k/32) * 512 + ((k%32)/2) * 32 + (c%16) * 2 + k%2; rows >= m
// are zero. One dword gather collects a K pair from 16 rows.
void mla_pack_q_amx(const void* q, int m, int d_qk, void* packed) {
  const int mp = (m + 15) & ~15, kpairs = d_qk / 2, ksteps = d_qk / 32;
  const __m512i row_offsets = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                 _mm512_set1_epi32(kpairs));
  uint32_t* dst = static_cast<uint32_t*>(packed);
  for (int c = 0; c < mp; c += 16) {
    const __mmask16 rows = m - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (m > c ? m - c : 0)) - 1);
    const int* src = static_cast<const int*>(q) + int64_t(c) * kpairs;
    uint32_t* tiles = dst + int64_t(c / 16) * ksteps * 256;
    for (int kp = 0; kp < kpairs; ++kp) {
      const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), rows, row_offsets, src + kp, 4);
      _mm512_storeu_si512(tiles + (kp / 16) * 256 + (kp % 16) * 16, v);
    }
  }
}

void mla_scores_amx(const void* const* k_rows, int nt, const void* q_packed, int mp, int d_qk, float* s,
                    uint16_t* k_stage) {
  const uint16_t* q = static_cast<const uint16_t*>(q_packed);
  const int groups = ((nt + 31) / 32) * 2, ksteps = d_qk / 32;
  const int64_t s_stride = int64_t(mp) * 4, group_offset = int64_t(16) * mp;
  Group rows[64];  // 1024 tokens; the set's tiles hold 256
  for (int g = 0; g < groups; ++g) rows[g] = group_rows(k_rows, nt, g, d_qk, k_stage);
  // K in chunks of kChunk steps, token pairs, then query tiles: a token pair's chunk (18 KiB) stays in L1
  // while the query tiles stream past it. Unchunked (18 steps at d_qk 576) a K pair and a query pair were
  // 72 KiB per block, more than L1, and the K tiles came from L2; 9 steps was the fastest chunk tried
  // (partial sums go through s; contiguous 1 KiB tiles for them were no faster).
  // (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
  constexpr int kChunk = 9;
  for (int k0 = 0; k0 < ksteps; k0 += kChunk) {
    const int k1 = k0 + kChunk < ksteps ? k0 + kChunk : ksteps;
    for (int g = 0; g < groups; g += 2) {
      for (int c = 0; c < mp; c += 32) {
        const uint16_t* qc = q + int64_t(c / 16) * ksteps * 512;
        float* out = s + int64_t(g) * group_offset + c;
        if (mp - c >= 32) {
          block<2>(rows[g], rows[g + 1], qc, ksteps, k0, k1, k0 == 0, out, s_stride, group_offset);
        } else {
          block<1>(rows[g], rows[g + 1], qc, ksteps, k0, k1, k0 == 0, out, s_stride, group_offset);
        }
      }
    }
  }
}

}  // namespace tessera::cpu
