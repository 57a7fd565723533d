#include "ep/experimental/pipeline_ring.h"

#include <atomic>
#include <cstring>

#include "ep/common/active_kernels.h"
#include "ep/transport/group_state.h"
#include "ep/transport/node_segments.h"
#include "tessera/core/error.h"

namespace tessera::ep::detail {
namespace {

constexpr int64_t kHeader = 64;
constexpr int kPpTag = 5 * 4096;  // past the dispatch/combine streams (transport/comm.h: stream * 4096 + seq)

int64_t round_up(int64_t v, int64_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

// A receive ring's control block, then its slots.
struct PpChannels::Ring {
  alignas(64) std::atomic<uint64_t> head;  // tensors the sender published
  alignas(64) std::atomic<uint64_t> tail;  // tensors the receiver consumed
};

struct PpChannels::Outgoing {
  int peer = -1;
  TransferSet set;
  std::vector<AlignedPtr<char>> stage;  // inflight slots
  std::vector<int64_t> entry;           // per slot: its transfer in `set`, or -1
  uint64_t sent = 0;
};

int64_t PpChannels::buffer_bytes(int64_t num_max_tensor_bytes, int num_max_inflight_tensors) {
  // DeepEP's hint: send and receive space for both neighbours.
  return round_up(num_max_tensor_bytes, 32) * num_max_inflight_tensors * 2 * 2;
}

PpChannels::PpChannels(Comm& comm, int64_t num_max_tensor_bytes, int num_max_inflight_tensors) : comm_(comm) {
  const char* fn = "ElasticBuffer.pp_set_config";
  TESSERA_CHECK(num_max_tensor_bytes > 0, fn, ": argument 'num_max_tensor_bytes' must be > 0, got ",
                num_max_tensor_bytes);
  TESSERA_CHECK(num_max_inflight_tensors > 0, fn, ": argument 'num_max_inflight_tensors' must be > 0, got ",
                num_max_inflight_tensors);
  const Topology& t = comm.topo();
  max_bytes_ = num_max_tensor_bytes;
  inflight_ = num_max_inflight_tensors;
  slot_bytes_ = kHeader + round_up(max_bytes_, 64);
  prev_ = (t.rank + t.num_ranks - 1) % t.num_ranks;
  next_ = (t.rank + 1) % t.num_ranks;
  const size_t ring_bytes = size_t(sizeof(Ring) + slot_bytes_ * inflight_);
  rings_ = map_node_segments(comm.group(), "p", 2 * ring_bytes, "pipeline ring");
  outgoing_.resize(2);
  for (int side = 0; side < 2; ++side) {
    const int peer = side == 0 ? prev_ : next_;
    if (t.same_node(peer, t.rank) || (side == 1 && next_ == prev_)) continue;
    Outgoing& o = outgoing_[size_t(side)];
    o.peer = peer;
    for (int i = 0; i < inflight_; ++i) o.stage.push_back(aligned_array<char>(size_t(slot_bytes_)));
    o.entry.assign(size_t(inflight_), -1);
  }
  recv_stage_ = aligned_array<char>(size_t(slot_bytes_));
  comm.group().state().net->barrier(kSetupTimeoutS, fn);
}

bool PpChannels::sends_pending() {
  const Net& net = *comm_.group().state().net;
  bool pending = false;
  for (Outgoing& o : outgoing_)
    for (size_t i = 0; i < o.set.entries.size(); ++i)
      if (!net.test(o.set, i, "ElasticBuffer.pp_send")) pending = true;
  return pending;
}

PpChannels::~PpChannels() {
  // MPI may still read staging slots of sends nobody received: leave those slots allocated rather
  // than free memory under an active request (only when the peer never took its tensors).
  try {
    if (sends_pending())
      for (Outgoing& o : outgoing_)
        for (auto& slot : o.stage) (void)slot.release();
  } catch (const Error&) {
    for (Outgoing& o : outgoing_)
      for (auto& slot : o.stage) (void)slot.release();
  }
}

// Ring 0 of a receiver takes its previous rank's tensors, ring 1 its next rank's (when different).
PpChannels::Ring* PpChannels::ring_of(int receiver, int sender) const {
  const Topology& t = comm_.topo();
  const int R = t.num_ranks;
  const int side = sender == (receiver + R - 1) % R ? 0 : 1;
  char* base = rings_[size_t(t.local_of[size_t(receiver)])].data();
  return reinterpret_cast<Ring*>(base + size_t(side) * (sizeof(Ring) + size_t(slot_bytes_ * inflight_)));
}

int PpChannels::check_neighbour(const char* fn, const char* arg, int peer) const {
  TESSERA_CHECK(peer == prev_ || peer == next_, fn, ": argument '", arg, "' (", peer,
                ") must be this rank's previous (", prev_, ") or next (", next_, ") rank in the ring");
  return peer == prev_ ? 0 : 1;
}

const char* PpChannels::bytes_of(const char* fn, const TensorView& t, int64_t* nbytes) const {
  TESSERA_CHECK(t.data != nullptr || t.numel() == 0, fn, ": argument 't' is not defined");
  TESSERA_CHECK(t.is_contiguous(), fn, ": argument 't' must be contiguous, got strides ", t.strides_str());
  *nbytes = t.numel() * dtype_storage_bytes(t.dtype);
  TESSERA_CHECK(*nbytes <= max_bytes_, fn, ": argument 't' has ", *nbytes,
                " bytes, more than num_max_tensor_bytes=", max_bytes_, " of pp_set_config");
  return static_cast<const char*>(t.data);
}

void PpChannels::send(const TensorView& t, int dst) {
  const char* fn = "ElasticBuffer.pp_send";
  const int side = check_neighbour(fn, "dst_rank_idx", dst);
  int64_t nbytes = 0;
  const char* data = bytes_of(fn, t, &nbytes);
  const Topology& topo = comm_.topo();
  if (topo.same_node(dst, topo.rank)) {
    Ring* r = ring_of(dst, topo.rank);
    const uint64_t n = r->head.load(std::memory_order_relaxed);  // this rank is the ring's only sender
    comm_.wait([&] { return n - r->tail.load(std::memory_order_acquire) < uint64_t(inflight_); }, dst,
               "consume an earlier pipeline tensor (all num_max_inflight_tensors slots are full)");
    char* slot = reinterpret_cast<char*>(r + 1) + size_t(n % uint64_t(inflight_)) * size_t(slot_bytes_);
    std::memcpy(slot, &nbytes, sizeof nbytes);
    kernels().copy(slot + kHeader, data, size_t(nbytes), nbytes >= (1 << 20));
    kernels().store_fence();
    r->head.store(n + 1, std::memory_order_release);
    return;
  }
  Outgoing& o = outgoing_[size_t(side)];
  const Net& net = *comm_.group().state().net;
  const size_t i = size_t(o.sent % uint64_t(inflight_));
  if (o.entry[i] >= 0) {
    const size_t e = size_t(o.entry[i]);
    comm_.wait([&] { return net.test(o.set, e, fn); }, dst, "receive an earlier pipeline tensor over MPI");
  }
  if (o.set.pending() == 0) {  // every earlier send completed: start the transfer list afresh
    o.set = TransferSet{};
    o.entry.assign(size_t(inflight_), -1);
  }
  char* stage = o.stage[i].get();
  std::memcpy(stage, &nbytes, sizeof nbytes);
  std::memcpy(stage + kHeader, data, size_t(nbytes));
  o.entry[i] = int64_t(o.set.entries.size());
  net.isend(o.set, stage, size_t(kHeader + round_up(nbytes, 16)), dst,
            kPpTag + (dst == prev_ && prev_ != next_ ? 1 : 0));
  ++o.sent;
}

void PpChannels::recv(const TensorView& t, int src) {
  const char* fn = "ElasticBuffer.pp_recv";
  check_neighbour(fn, "src_rank_idx", src);
  int64_t nbytes = 0;
  char* data = const_cast<char*>(bytes_of(fn, t, &nbytes));
  const Topology& topo = comm_.topo();
  if (topo.same_node(src, topo.rank)) {
    Ring* r = ring_of(topo.rank, src);
    const uint64_t n = r->tail.load(std::memory_order_relaxed);  // this rank is the ring's only receiver
    comm_.wait([&] { return r->head.load(std::memory_order_acquire) > n; }, src, "send a pipeline tensor");
    const char* slot = reinterpret_cast<const char*>(r + 1) + size_t(n % uint64_t(inflight_)) * size_t(slot_bytes_);
    int64_t sent = 0;
    std::memcpy(&sent, slot, sizeof sent);
    // A size mismatch leaves the tensor queued, so a call with the right size can still take it.
    TESSERA_CHECK(sent == nbytes, fn, ": rank ", src, " sent a tensor of ", sent, " bytes, argument 't' has ", nbytes,
                  " (the tensor stays queued)");
    std::memcpy(data, slot + kHeader, size_t(nbytes));
    r->tail.store(n + 1, std::memory_order_release);
    return;
  }
  // The sender's tag names the ring: 0 = it sent to its next rank (us, from our prev), 1 = to its prev.
  const Net& net = *comm_.group().state().net;
  const int tag = kPpTag + (src == next_ && prev_ != next_ ? 1 : 0);
  TransferSet set;
  net.irecv(set, recv_stage_.get(), size_t(slot_bytes_), src, tag);
  comm_.wait([&] { return net.test(set, 0, fn); }, src, "send a pipeline tensor over MPI");
  int64_t sent = 0;
  std::memcpy(&sent, recv_stage_.get(), sizeof sent);
  TESSERA_CHECK(sent == nbytes, fn, ": rank ", src, " sent a tensor of ", sent, " bytes, argument 't' has ", nbytes,
                " (over MPI the tensor is consumed)");
  std::memcpy(data, recv_stage_.get() + kHeader, size_t(nbytes));
}

}  // namespace tessera::ep::detail
