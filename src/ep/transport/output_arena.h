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

#include "ep/transport/comm.h"
#include "ep/transport/transport.h"
#include "tessera/ep/types.h"

namespace tessera::ep::detail {

// In ASan builds the free space of the arena, in this process's mapping, is poisoned: the owner's
// accesses outside its live output tensors are reported (asan_poison.h).
struct ArenaState {
  ShmSegment segment;
  std::mutex mutex;
  std::map<int64_t, int64_t> free_ranges;  // offset -> bytes, coalesced
  ~ArenaState();                           // unpoisons the mapping before it is unmapped
};

// An allocation of `rows` x `row_bytes` bytes in this rank's arena as a [rows, cols] tensor of dtype;
// undefined when it does not fit. *offset receives its byte offset in the arena.
OwnedTensor arena_tensor(const std::shared_ptr<ArenaState>& arena, DType dtype, int64_t rows, int64_t cols,
                         int64_t* offset);
std::shared_ptr<ArenaState> make_arena(ShmSegment segment);

// Direct receive for the dispatch planned in `plan` (this rank's arena exists and every rank is on this
// node): the count exchange and the output placement. Points plan.direct_x at *x_at (per destination,
// where this rank's first row goes there, or null: the slot planes; *x_at must outlive the send) and
// sets plan.x_in_place. Returns this rank's recv_x, undefined when the arena has no room (the slot path
// this call); its rows are *rows when `sized`, otherwise the received count, which *rows receives.
OwnedTensor start_direct_receive(Comm& comm, uint64_t seq, DispatchPlan& plan, std::vector<char*>* x_at, DType dtype,
                                 int64_t hidden, bool sized, int64_t* rows);

}  // namespace tessera::ep::detail
