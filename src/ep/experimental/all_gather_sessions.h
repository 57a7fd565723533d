// All-gather sessions (DeepEP v2's experimental AGRS calls).
//
// A session gathers several tensors; the gathered [R, ...] results stay valid until the session ends.
// On one node every rank owns a shared segment [control | num_max_session_bytes]; each all_gather
// takes the next R * nbytes of it (the same offsets on every rank, since the ranks make the same
// calls), every rank writes its tensor into each rank's segment at offset + rank * nbytes (one copy
// per destination; none for its own when the tensor came from get_inplace) and counts the gather in
// that segment's per-source arrival word; the returned wait blocks until all sources arrived. A rank
// writes into a peer's segment in session s only after that peer ended session s - 1. Across nodes
// the gather runs as MPI_Allgather into private memory at the same offsets.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ep/transport/comm.h"
#include "tessera/core/memory.h"
#include "tessera/ep/types.h"

namespace tessera::ep::detail {

class AgrsSessions {
 public:
  // Collective over the group.
  AgrsSessions(Comm& comm, int64_t num_max_session_bytes, int num_max_all_gathers_per_session);

  void create_session();
  void destroy_session();
  // This rank's slots of the next all_gather(s) with these byte sizes, as uint8 tensors.
  std::vector<OwnedTensor> inplace(const std::vector<int64_t>& nbytes);
  // One gathered tensor per input ([R, *input shape], the input's dtype) and the wait for arrival.
  std::pair<std::vector<OwnedTensor>, Event> all_gather(const std::vector<TensorView>& tensors);

 private:
  struct Control;
  Control* control(int local) const;
  char* data(int local) const;
  // p (inside this rank's data) as tensor storage that keeps the segments or private memory alive.
  std::shared_ptr<void> keep(char* p) const;
  void check_in_session(const char* fn) const;
  // Checks tensor j's byte size (a positive multiple of 32, room left in the session) and returns the
  // offset of its gathered [R, n] block at *at, advancing *at past it.
  int64_t place(const char* fn, size_t j, int64_t n, int64_t* at) const;

  Comm& comm_;
  int64_t max_bytes_ = 0;
  int max_gathers_ = 0;
  bool shared_ = false;                                // one node: shared segments; otherwise private memory + MPI
  std::shared_ptr<std::vector<ShmSegment>> segments_;  // by local rank (shared; kept alive by results)
  std::shared_ptr<char> private_;                      // gathered data (several nodes)
  uint64_t session_ = 0;                               // sessions begun
  bool in_session_ = false;
  int64_t cursor_ = 0;            // bytes of the session's data used
  int gathers_ = 0;               // all_gathers in this session
  uint64_t total_gathers_ = 0;    // all_gathers of every session (the arrival counts)
  std::vector<bool> peer_ready_;  // per local rank: it ended the previous session (checked once)
};

}  // namespace tessera::ep::detail
