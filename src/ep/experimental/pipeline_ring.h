// Pipeline-parallel send/recv between ring neighbours (DeepEP v2's experimental pp_* calls).
//
// Every rank receives from its previous and next rank in the ring (rank - 1 and rank + 1 mod R; one
// ring when they are the same rank). On a node, each receive ring lives in the receiver's shared
// memory: `inflight` slots of [64-byte header | num_max_tensor_bytes], a head count written by the
// sender (release after the slot) and a tail count written by the receiver (release after copying
// out); a sender waits while `inflight` of its tensors are unconsumed. Between nodes the same FIFO
// runs over MPI (per destination `inflight` staging slots; MPI keeps one stream's messages in order).
#pragma once

#include <cstdint>
#include <vector>

#include "ep/transport/comm.h"
#include "ep/transport/net.h"
#include "tessera/core/memory.h"
#include "tessera/core/tensor.h"

namespace tessera::ep::detail {

class PpChannels {
 public:
  // Collective over the group (creates and maps the rings).
  PpChannels(Comm& comm, int64_t num_max_tensor_bytes, int num_max_inflight_tensors);
  ~PpChannels();

  // True while a tensor this rank sent over MPI has not reached its receiver (tests them once).
  bool sends_pending();

  void send(const TensorView& t, int dst);  // returns once t may be reused
  void recv(const TensorView& t, int src);  // blocks until the next tensor from src arrived

  static int64_t buffer_bytes(int64_t num_max_tensor_bytes, int num_max_inflight_tensors);

 private:
  struct Ring;
  struct Outgoing;  // MPI sends to one neighbour on another node
  Ring* ring_of(int receiver, int sender) const;
  int check_neighbour(const char* fn, const char* arg, int peer) const;
  const char* bytes_of(const char* fn, const TensorView& t, int64_t* nbytes) const;

  Comm& comm_;
  int64_t max_bytes_ = 0, slot_bytes_ = 0;
  int inflight_ = 0;
  int prev_ = 0, next_ = 0;
  std::vector<ShmSegment> rings_;   // by local rank (receivers on this node)
  std::vector<Outgoing> outgoing_;  // [0]: to prev, [1]: to next (other nodes only)
  AlignedPtr<char> recv_stage_;
};

}  // namespace tessera::ep::detail
