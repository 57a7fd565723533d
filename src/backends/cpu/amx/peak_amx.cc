// Peak AMX bf16 rate: tdpbf16ps into 4 independent C tiles from 2 a-tiles and 2 b-tiles that stay in
// tile registers (the 2 x 2 blocking GEMM kernels use). Each b pair is (+x, -x), so every product pair
// cancels and the accumulators stay zero however long the loop runs.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/amx/tile_config.h"
#include "backends/cpu/peak_kernels.h"

namespace tessera::cpu {
namespace {

using amx::TileConfig;

double amx_bf16_loop(int64_t iters, float* sink) {
  TileConfig cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  amx::use_tile_config(cfg);
  // Operands from *sink (a run-time value) so nothing folds; bf16 bits of (seed + 1.5) and of +-0.5.
  const float seed = *static_cast<volatile float*>(sink) + 1.5f;
  unsigned int bits;
  std::memcpy(&bits, &seed, 4);
  alignas(64) unsigned short a[16 * 32], b[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) {
    a[i] = static_cast<unsigned short>(bits >> 16);
    b[i] = (i % 2) ? 0xBF00 : 0x3F00;  // -0.5, +0.5
  }
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[16 * 16];
  _tile_stored(0, c, 64);
  amx::release_tiles();
  *sink = c[0];
  return double(iters) * 4 * 16 * 16 * 32 * 2;  // 4 tiles x 16 x 16 outputs x 32 products x 2 flops
}

}  // namespace

ComputePeakFn peak_bf16_amx() {
  return amx_bf16_loop;
}

}  // namespace tessera::cpu
