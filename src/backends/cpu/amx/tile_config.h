// The 64-byte operand of ldtilecfg / sttilecfg (palette 1), shared by this folder's files, and the
// calls that set a thread's tile configuration. Private to the folder.
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

namespace tessera::cpu::amx {

struct alignas(64) TileConfig {
  uint8_t palette;    // 1: eight tiles of up to 16 rows x 64 bytes
  uint8_t start_row;  // 0 (restart point for interrupted tile loads)
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row of tile i (0: unconfigured)
  uint8_t rows[16];    // rows of tile i
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// Makes `want` the calling thread's tile configuration (tile_config.cc).
void use_tile_config(const TileConfig& want);

// All eight tiles 16 rows x 64 bytes: the GEMM's full configuration, shared by kernels that pad their
// tails by copying, so switching between them never reloads. Built once (tile_config.cc).
const TileConfig& full_tile_config();

// Releases the calling thread's tiles (tilerelease) and forgets its configuration.
void release_tiles();

}  // namespace tessera::cpu::amx
