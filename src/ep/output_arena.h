// Direct receive: dispatch outputs that live in shared memory, so same-node senders write each token
// straight into the receiver's recv_x (one copy per remote destination, and one read of each input row
// for all its destinations) instead of into the receive region and then, a second time, into recv_x.
//
// Every rank owns an arena segment mapped by the ranks of its node. Per operation: senders publish
// their token counts (GroupFlag::early_*), the receiver allocates recv_x in its arena and publishes its
// offset and each source's first row (RegionControl::out_*), senders write their rows there, then the
// usual ready flags follow (the small per-token fields still go through the slot planes). When the
// arena has no room (the caller holds many earlier outputs) the receiver publishes -1 and that
// operation uses the slot path. recv_x tensors keep the arena mapping alive after the buffer is gone.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ep/comm.h"
#include "tessera/ep/types.h"

namespace tessera::ep::detail {

struct ArenaState {
  ShmSegment segment;
  std::mutex mutex;
  std::map<int64_t, int64_t> free_ranges;  // offset -> bytes, coalesced
};

// An allocation of `rows` x `row_bytes` bytes in this rank's arena as a [rows, cols] tensor of dtype;
// undefined when it does not fit. *offset receives its byte offset in the arena.
OwnedTensor arena_tensor(const std::shared_ptr<ArenaState>& arena, DType dtype, int64_t rows, int64_t cols,
                         int64_t* offset);
std::shared_ptr<ArenaState> make_arena(ShmSegment segment);

struct DirectReceive {
  OwnedTensor recv_x;               // this rank's output (undefined: the slot path this time)
  std::vector<int64_t> counts_in;   // tokens from each source rank
  std::vector<char*> x_at;          // per destination rank: where this rank's first row goes, or null
};

// The count exchange and output placement of one dispatch between the ranks of a single node.
// my_counts[d]: tokens this rank sends to rank d; rows: the output's row count given the counts in
// (exact) or, when worst_rows > 0, that many.
DirectReceive negotiate_direct_receive(Comm& comm, uint64_t seq, const std::vector<int64_t>& my_counts, DType dtype,
                                       int64_t hidden, int64_t row_bytes, int64_t worst_rows);

}  // namespace tessera::ep::detail
