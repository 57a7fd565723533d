// The state behind an ElasticBuffer, shared by its dispatch and combine implementations.
#pragma once

#include <functional>
#include <limits>
#include <memory>

#include "ep/experimental/all_gather_sessions.h"
#include "ep/experimental/engram_storage.h"
#include "ep/experimental/pipeline_ring.h"
#include "ep/transport/comm.h"
#include "ep/transport/transport.h"
#include "tessera/ep/elastic_buffer.h"

namespace tessera::ep::detail {

// Operations of one buffer complete in order: a new one first finishes the pending asynchronous one.
class PendingOps {
 public:
  void complete() {
    if (pending_ && *pending_) Event(pending_).wait();
  }
  // Runs finish now (async == false) or keeps it as the pending operation behind the returned Event.
  Event defer(std::function<void()> finish, bool async) {
    if (!async) {
      finish();
      return Event();
    }
    pending_ = std::make_shared<std::function<void()>>(std::move(finish));
    return Event(pending_);
  }
  // defer, then a copy of the operation's outputs `out` (taken after a synchronous finish ran) with
  // the Event set.
  template <class Result>
  Result defer_result(std::function<void()> finish, bool async, const Result& out) {
    Event ev = defer(std::move(finish), async);
    Result result = out;
    result.event = ev;
    return result;
  }

 private:
  std::shared_ptr<std::function<void()>> pending_;
};

// The common end of ElasticBuffer.combine and Buffer.combine: sends this rank's contributions now;
// the receive side (reduce into op->out, free this rank's region, wait for ranks that read its rows in
// place) runs now or when the returned result's event is waited on. Op holds seq, plan, src, cs,
// bias0, bias1 and out.
template <class Op>
auto start_combine(Comm& comm, PendingOps& pending, const std::shared_ptr<Op>& op, const char* fn, bool async) {
  op->seq = comm.begin(fn);
  combine_send(comm, op->seq, op->plan, op->src, op->cs);
  auto finish = [op, &comm] {
    combine_receive(comm, op->seq, op->plan, op->src, op->cs, op->out.combined_x.view,
                    op->out.combined_topk_weights.view, op->bias0, op->bias1);
    transport_finish(comm, op->seq);
    combine_release(comm, op->seq, op->cs);
  };
  return pending.defer_result(finish, async, op->out);
}

// Bytes of the shared output arena each rank gets (transport/output_arena.h); 0 when direct receive is off.
int64_t output_arena_bytes(const Topology& t, int64_t region_bytes,
                           int64_t default_cap = std::numeric_limits<int64_t>::max());

struct ElasticState {
  std::shared_ptr<Group> group;
  ElasticBufferConfig config;
  std::unique_ptr<Comm> comm;
  std::unique_ptr<PpChannels> pp;       // after pp_set_config (uses comm)
  std::unique_ptr<AgrsSessions> agrs;   // after agrs_set_config (uses comm)
  std::unique_ptr<EngramStore> engram;  // after the first engram_write (uses comm)
  Mode mode = Mode::kDirect;
  int64_t num_bytes = 0;
  PendingOps pending;
  bool destroyed = false;
  // The last dispatch's routing and handle, refilled by the next dispatch once nothing else holds them
  // (dispatch.cc: recycle).
  std::shared_ptr<Routing> spare_routing;
  std::shared_ptr<EpHandle> spare_handle;

  // Checks the buffer is usable and finishes the pending operation; fn names the caller.
  Comm& start(const char* fn);
};

}  // namespace tessera::ep::detail
