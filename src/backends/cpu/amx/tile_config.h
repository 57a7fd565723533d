// The 64-byte operand of ldtilecfg / sttilecfg (palette 1), shared by this folder's files. Like
// avx512bf16/fp8_convert.h, private to the folder: its one function is static (backends/cpu/README.md).
#pragma once

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

namespace tessera::cpu::amx {

struct alignas(64) TileConfig {
  uint8_t palette;      // 1: eight tiles of up to 16 rows x 64 bytes
  uint8_t start_row;    // 0 (restart point for interrupted tile loads)
  uint8_t reserved[14];
  uint16_t colsb[16];   // bytes per row of tile i (0: unconfigured)
  uint8_t rows[16];     // rows of tile i
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// Makes `want` the calling thread's tile configuration. Reading the current one back costs ~17 cycles,
// loading one ~160 (and zeroes every tile), so it is loaded only when it differs: other code in the
// process (oneDNN, say) may have configured tiles its own way since this thread's last call.
static inline void use_tile_config(const TileConfig& want) {
  TileConfig have;
  _tile_storeconfig(&have);
  if (memcmp(&have, &want, sizeof(want)) != 0) _tile_loadconfig(&want);
}

}  // namespace tessera::cpu::amx
