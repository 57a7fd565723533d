// Each thread's tile configuration, shared by the folder's kernels. Reading the current configuration
// back (sttilecfg) waits for the thread's tile instructions in flight to finish: checked before every
// GEMM micro-kernel call, it took 25% of a bf16 M=1024 N=7168 K=2048 profile. So a thread remembers
// what it loaded and trusts that for the rest of a parallel region, where only tessera code runs on it;
// the first call in a region, and every call outside one, reads the configuration back, since other
// code in the process (oneDNN, say) may have configured the calling thread's tiles since.
#include "backends/cpu/amx/tile_config.h"

#include "tessera/core/parallel_region.h"

namespace tessera::cpu::amx {
namespace {

__thread TileConfig t_loaded;              // the last configuration this thread loaded or found
__thread uint64_t t_epoch = ~uint64_t(0);  // the region it was valid in (~0: none)

}  // namespace

void use_tile_config(const TileConfig& want) {
  if (in_parallel_region()) {
    const uint64_t epoch = parallel_region_epoch();
    if (t_epoch == epoch) {
      if (memcmp(&t_loaded, &want, sizeof(want)) != 0) {
        _tile_loadconfig(&want);
        t_loaded = want;
      }
      return;
    }
    t_epoch = epoch;
  } else {
    t_epoch = ~uint64_t(0);
  }
  TileConfig have;
  _tile_storeconfig(&have);
  if (memcmp(&have, &want, sizeof(want)) != 0) _tile_loadconfig(&want);
  t_loaded = want;
}

const TileConfig& full_tile_config() {
  static const TileConfig config = [] {
    TileConfig c;
    memset(&c, 0, sizeof(c));
    c.palette = 1;
    for (int t = 0; t < 8; ++t) {
      c.colsb[t] = 64;
      c.rows[t] = 16;
    }
    return c;
  }();
  return config;
}

void release_tiles() {
  _tile_release();
  t_epoch = ~uint64_t(0);
}

}  // namespace tessera::cpu::amx
