// Row sweep: an alternative body for element-wise grids, run per band of blocks instead of per block.
//
// A grid T.Kernel(ceildiv(N, bn), ceildiv(M, bm)) whose blocks each stream a bm x bn tile of row-major
// tensors gives every thread bm short row segments per block: the hardware prefetcher restarts on
// every segment and a DRAM-bound kernel reaches about half of its bandwidth
// (measurements: docs/notes/2026-12-05-measurements-moved-from-source.md). When the body allows it,
// the CPU backend also emits a "band" function that runs every block of grid dimension 0 for one
// (by, bz): for each row of the tile, for bx in [0, grid[0]), the tile's vector loop - so a thread
// streams whole rows. The launch picks it when there are enough bands for the threads.
//
// Legal because the blocks of a grid and the iterations of a vectorized (T.Parallel) loop are
// independent: only the order changes. Applies when the block body is a perfect loop nest (no
// on-chip buffers, no statements between the loops) ending in a vectorized loop of constant extent E,
// grid dimension 0 does not change the outer loops, and every global access in the vector loop that
// moves with its lane is contiguous along it (offset + 1 per lane) and continues across blocks
// (offset + E per bx), with at least one store among them.
#pragma once

#include "tessera/tl/ir.h"

namespace tessera::tl {

// The band body for `launch` (its loop nest with a serial loop over block_vars[0] in [0, grid[0])
// around the vector loop), or an undefined Stmt when the grid does not qualify.
Stmt row_sweep_body(const LaunchNode* launch);

}  // namespace tessera::tl
