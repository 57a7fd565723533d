// One shared-memory segment per rank of a node, mapped by every rank of that node (what the
// experimental PP rings and AGRS sessions live in). Collective over the group.
#pragma once

#include <cstddef>
#include <vector>

#include "ep/shm_segment.h"
#include "tessera/ep/group.h"

namespace tessera::ep::detail {

// Every rank creates a zero-filled segment of `bytes` and maps those of its node's ranks; the result
// is indexed by local rank (this rank's own at topology().local_rank). `kind` (a few letters) names
// the segments; names are unlinked once every rank mapped them.
std::vector<ShmSegment> map_node_segments(Group& group, const char* kind, size_t bytes, double timeout_s);

}  // namespace tessera::ep::detail
