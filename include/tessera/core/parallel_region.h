// tessera/core/parallel_region.h - what code running on a thread can ask about the parallel region it
// is in. Plain declarations only, so the ISA-flagged backend files may include it
// (src/backends/cpu/README.md, rule 1).
#pragma once

#include <stdint.h>

namespace tessera {

// True inside a worker of a parallel region (nested parallel calls then run inline).
bool in_parallel_region();

// Changes whenever a thread that is in no region starts one. Inside a region only tessera code runs on
// its threads, so per-thread hardware state that other code on the calling thread may change between
// calls (AMX tile configurations: backends/cpu/amx/tile_config.cc) can be checked once per region.
uint64_t parallel_region_epoch();

}  // namespace tessera
