// One shared-memory segment per rank of a node, mapped by every rank of that node (what the
// experimental PP rings and AGRS sessions live in). Collective over the group.
#pragma once

#include <cstddef>
#include <vector>

#include "ep/transport/shm_segment.h"
#include "tessera/ep/group.h"

namespace tessera::ep::detail {

// How long collective set-up steps (creating and mapping segments) wait for the other ranks.
constexpr double kSetupTimeoutS = 120;

// Every rank creates a zero-filled segment of `bytes` and maps those of its node's ranks; the result
// is indexed by local rank (this rank's own at topology().local_rank). `kind` (a few letters) names
// the segments, `what` names them in timeout errors ("region": "tessera.ep: region creation"); names
// are unlinked once every rank mapped them.
std::vector<ShmSegment> map_node_segments(Group& group, const char* kind, size_t bytes, const char* what);

}  // namespace tessera::ep::detail
