#include "ep/transport/node_segments.h"

#include <cstdio>
#include <string>

#include "ep/transport/group_state.h"

namespace tessera::ep::detail {

std::vector<ShmSegment> map_node_segments(Group& group, const char* kind, size_t bytes, const char* what) {
  GroupState& st = group.state();
  const Topology& t = group.topology();
  // Advanced by every rank at the same collective call: the same counter everywhere.
  const unsigned long long counter = st.segments_made.fetch_add(1);
  auto name = [&](int rank) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "/tessera-ep-%016llx-%llu-%s%d", (unsigned long long)st.nonce, counter, kind, rank);
    return std::string(buf);
  };
  std::vector<ShmSegment> segs(static_cast<size_t>(t.num_local_ranks));
  segs[size_t(t.local_rank)] = ShmSegment::create(name(t.rank), bytes);
  st.node_net->barrier(kSetupTimeoutS, (std::string("tessera.ep: ") + what + " creation").c_str());
  for (int l = 0; l < t.num_local_ranks; ++l)
    if (l != t.local_rank) segs[size_t(l)] = ShmSegment::open(name(t.node_ranks[size_t(t.node)][size_t(l)]), bytes);
  st.node_net->barrier(kSetupTimeoutS, (std::string("tessera.ep: ") + what + " mapping").c_str());
  segs[size_t(t.local_rank)].unlink();
  return segs;
}

}  // namespace tessera::ep::detail
