// What a Group holds behind its public face: the communicators of the group, of its node and of its
// host, and the topology computed from them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "ep/transport/net.h"
#include "tessera/ep/group.h"

namespace tessera::ep::detail {

struct GroupState {
  std::unique_ptr<Net> net;       // every rank of the group
  std::unique_ptr<Net> node_net;  // the ranks of this rank's (possibly pretend) node
  std::unique_ptr<Net> host_net;  // the ranks of this physical host
  Topology topo;
  uint64_t nonce = 0;                      // the same on every rank; names shared-memory segments
  std::atomic<uint64_t> segments_made{0};  // per-group counter, advanced collectively
};

// Builds the state from the group communicator (collective over it).
std::unique_ptr<GroupState> make_group_state(std::unique_ptr<Net> net, int ranks_per_node);

}  // namespace tessera::ep::detail
