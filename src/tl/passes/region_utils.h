// Helpers shared by the passes that work on tile-op regions.
#pragma once

#include <string>
#include <vector>

#include "tessera/tl/ir.h"

namespace tessera::tl {

// Dimensions of a region whose extent is not the constant 1 (the "tile" dims, in order).
std::vector<int> tile_dims(const Region& r);
std::vector<Expr> tile_extents(const Region& r);
// "[128, 64]" for messages.
std::string extents_str(const std::vector<Expr>& extents);
// True when the two extents are provably equal (same constant, or equal after simplification).
bool same_extent(const Expr& a, const Expr& b);
// True when the region is its whole buffer: every min the constant 0, every extent the buffer's constant
// dimension.
bool covers_whole(const Region& r);
// Element (loop indices over the tile dims) -> full index vector of the region's buffer.
std::vector<Expr> region_index(const Region& r, const std::vector<Expr>& tile_index);
// A prefetch (tlrt::prefetch_2d) of the rows of `src` as they will be at iteration var + dist of the
// loop over var; undefined when the tile is not a set of contiguous rows.
Stmt prefetch_rows_ahead(const Region& src, const Expr& var, int64_t dist, Loc loc);

}  // namespace tessera::tl
