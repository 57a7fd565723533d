// Decode GEMV (M <= 8) on AMX tiles: weight rows are the a-operand (16 rows x 32 K values per tile,
// read as stored), the activations the b-operand (32 K values x M columns, K pairs interleaved), so a
// tdpbf16ps yields 16 weight rows x M outputs. On an AMX Xeon vdpbf16ps runs at half the fp32 FMA rate,
// which left the vector GEMV compute-bound below DRAM speed; a tile product does 16 x 32 x M
// multiply-adds in ~16 cycles. This file is the bf16-weight kernel; e4m3 weights go to gemv_amx_e4m3.cc
// (converted once per element, one sequential pass per block of rows).
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md)
//
// Tiles: 0-2 accumulate three 16-row blocks (48 weight rows, three independent chains to cover the
// product's latency), 3-5 hold their weight tiles, 6 the activation tile. Weights are loaded straight
// from their rows; a block with rows or K values past the matrix goes through a 16-row staging copy in
// tile order first. bf16 GEMMs carry no scales, so the accumulators run over the whole K and are stored
// once at the end.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/amx/gemv_amx_e4m3.h"
#include "backends/cpu/amx/gemv_units.h"
#include "backends/cpu/amx/tile_config.h"
#include "backends/cpu/gemm_kernel_set.h"

namespace tessera::cpu {
namespace {

constexpr int kBlocks = 3;     // 16-row blocks per pass
constexpr int kStageK = 1024;  // K values staged per partial block at a time

using amx::TileConfig;

void configure(int m) {
  TileConfig want;
  std::memset(&want, 0, sizeof(want));
  want.palette = 1;
  for (int t = 0; t < 7; ++t) want.rows[t] = 16;
  for (int t = 0; t < 3; ++t) want.colsb[t] = uint16_t(m * 4);  // C: 16 rows x m fp32
  for (int t = 3; t < 6; ++t) want.colsb[t] = 64;               // weights: 16 rows x 32 bf16
  want.colsb[6] = uint16_t(m * 4);                              // activations: 16 pairs x m
  amx::use_tile_config(want);
}

// Activations a[m][k] (bf16) as K pairs: bt[(k/2) * m * 2 + mi * 2 + k % 2], zero past K up to k_pad
// (a multiple of 32). Each 32-value step is an 8-column transpose in registers (store_b_step, the
// missing columns zero), then m of every 8 dwords kept: element by element it cost more than the
// products of a small call.
void interleave_activations(const GemvArgs& p, int64_t k_pad, uint16_t* bt) {
  const int m = p.m;
  const __mmask8 keep = __mmask8((1u << m) - 1);
  uint32_t* out = reinterpret_cast<uint32_t*>(bt);
  alignas(64) uint32_t step[16 * 8];
  for (int64_t k = 0; k < k_pad; k += 32) {
    __m512i v[8];
    const __mmask32 valid = p.k - k >= 32 ? ~0u : p.k - k <= 0 ? 0u : (1u << (p.k - k)) - 1;
    for (int mi = 0; mi < 8; ++mi)
      v[mi] = mi < m ? _mm512_maskz_loadu_epi16(valid, static_cast<const char*>(p.a) + (mi * p.a_stride + k) * 2)
                     : _mm512_setzero_si512();
    if (m == 8) {
      amx::store_b_step(out + (k / 2) * m, v, 8);
      continue;
    }
    amx::store_b_step(step, v, 8);
    for (int q = 0; q < 16; ++q)
      _mm256_mask_storeu_epi32(out + (k / 2 + q) * m, keep,
                               _mm256_load_si256(reinterpret_cast<const __m256i*>(step + 8 * q)));
  }
}

// Weight rows [row0, row0 + 16) x K [k0, k0 + kc) in tile order (step s at dst + s * 512: 16 rows x 32
// values), zero for rows >= rows_valid and K >= p.k. kc is a multiple of 32.
void stage_weights(const GemvArgs& p, int64_t row0, int rows_valid, int64_t k0, int kc, uint16_t* dst) {
  for (int r = 0; r < 16; ++r) {
    uint16_t* out = dst + r * 32;
    if (r >= rows_valid) {
      for (int s = 0; s < kc / 32; ++s) _mm512_store_si512(out + s * 512, _mm512_setzero_si512());
      continue;
    }
    const char* row = static_cast<const char*>(p.w) + (row0 + r) * p.ldw * 2;
    for (int kk = 0; kk < kc; kk += 64) {
      const int64_t left = p.k - (k0 + kk);
      const __mmask32 m0 = left >= 32 ? ~0u : (left <= 0 ? 0u : (1u << left) - 1);
      const __mmask32 m1 = left >= 64 ? ~0u : (left <= 32 ? 0u : (1u << (left - 32)) - 1);
      const __m512i lo = _mm512_maskz_loadu_epi16(m0, row + (k0 + kk) * 2);
      const __m512i hi = _mm512_maskz_loadu_epi16(m1, row + (k0 + kk + 32) * 2);
      _mm512_store_si512(out + (kk / 32) * 512, lo);
      if (kk + 32 < kc) _mm512_store_si512(out + (kk / 32 + 1) * 512, hi);
    }
  }
}

template <int B>
inline void zero_acc() {
  _tile_zero(0);
  if (B > 1) _tile_zero(1);
  if (B > 2) _tile_zero(2);
}

// A thread's staging buffer for kBlocks 16-row blocks (96 KiB: on the heap, not in static TLS).
struct Stage {
  uint16_t* data = nullptr;
  ~Stage() { std::free(data); }
  uint16_t* block(int b) {
    if (!data) data = static_cast<uint16_t*>(std::aligned_alloc(64, size_t(kBlocks) * kStageK * 16 * 2));
    return data + size_t(b) * kStageK * 16;
  }
};

// Rows [row0, row0 + 16 * B) of the call's range (B blocks, the last one possibly partial).
template <int B>
void row_blocks(const GemvArgs& p, int64_t row0, int rows_valid, const uint16_t* bt, int64_t k_pad) {
  static thread_local Stage stage;
  const int64_t b_step = int64_t(16) * p.m * 2 * 2;  // bytes of 32 K values of activations
  const int64_t w_stride = p.ldw * 2;
  auto block_rows = [&](int b) { return rows_valid - 16 * b < 16 ? rows_valid - 16 * b : 16; };
  zero_acc<B>();
  for (int64_t k0 = 0; k0 < k_pad; k0 += kStageK) {
    const int kc = int(k_pad - k0 < kStageK ? k_pad - k0 : kStageK);
    // Rows that exist for the whole block are read in place; the rest are staged.
    const bool direct = rows_valid == 16 * B && k0 + kc <= p.k;
    if (!direct)
      for (int b = 0; b < B; ++b) stage_weights(p, row0 + 16 * b, block_rows(b), k0, kc, stage.block(b));
    for (int s = 0; s < kc / 32; ++s) {
      const int64_t k = k0 + 32 * s;
      _tile_loadd(6, reinterpret_cast<const char*>(bt) + (k / 32) * b_step, p.m * 4);
      if (direct) {
        const char* w = static_cast<const char*>(p.w) + row0 * w_stride + k * 2;
        _tile_loadd(3, w, w_stride);
        if (B > 1) _tile_loadd(4, w + 16 * w_stride, w_stride);
        if (B > 2) _tile_loadd(5, w + 32 * w_stride, w_stride);
      } else {
        _tile_loadd(3, stage.block(0) + s * 512, 64);
        if (B > 1) _tile_loadd(4, stage.block(1) + s * 512, 64);
        if (B > 2) _tile_loadd(5, stage.block(2) + s * 512, 64);
      }
      _tile_dpbf16ps(0, 3, 6);
      if (B > 1) _tile_dpbf16ps(1, 4, 6);
      if (B > 2) _tile_dpbf16ps(2, 5, 6);
    }
  }
  alignas(64) float sum[kBlocks][16 * 16];  // 16 rows x m fp32 per block, row stride 16 floats
  _tile_stored(0, sum[0], 64);
  if (B > 1) _tile_stored(1, sum[1], 64);
  if (B > 2) _tile_stored(2, sum[2], 64);
  for (int r = 0; r < rows_valid; ++r)
    for (int mi = 0; mi < p.m; ++mi) p.out[mi * p.ldo + p.n0 + row0 + r] = sum[r / 16][(r % 16) * 16 + mi];
}

void gemv(const GemvArgs& p) {
  if (p.w_type == GemmSrcType::kE4M3) return amx::gemv_e4m3(p);
  configure(p.m);
  const int64_t k_pad = (p.k + 31) / 32 * 32;
  uint16_t* bt = static_cast<uint16_t*>(p.scratch);
  interleave_activations(p, k_pad, bt);
  const int64_t rows = p.n1 - p.n0;
  // Row offsets below are relative to n0; the weight pointer is shifted to match.
  GemvArgs q = p;
  q.w = static_cast<const char*>(p.w) + p.n0 * p.ldw * 2;
  for (int64_t r0 = 0; r0 < rows; r0 += 16 * kBlocks) {
    const int valid = int(rows - r0 < 16 * kBlocks ? rows - r0 : 16 * kBlocks);
    if (valid > 32) {
      row_blocks<3>(q, r0, valid, bt, k_pad);
    } else if (valid > 16) {
      row_blocks<2>(q, r0, valid, bt, k_pad);
    } else {
      row_blocks<1>(q, r0, valid, bt, k_pad);
    }
  }
}

}  // namespace

GemvFn gemv_kernel_amx() {
  return gemv;
}

}  // namespace tessera::cpu
