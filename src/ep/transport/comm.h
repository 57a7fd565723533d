// Comm: the transport state of one buffer.
//
// Every rank owns one shared-memory region, mapped by the ranks of its node:
//   [control: done_seq, then one flag line per group][group 0][group 1]...[group R-1]
// Group g is a fixed slot area of group_bytes, written by exactly one rank per operation (which one
// depends on the operation and the mode, see dispatch.cc / combine.cc) and read only by the owner.
// The protocol per operation (seq = 1, 2, ... identical on every rank):
//   writer: wait until the owner's done_seq >= seq-1 (the owner finished reading the previous
//           operation), write the slots, store count, then ready_seq[g] = seq with release order;
//   owner:  wait until ready_seq[g] == seq (acquire), read count and the slots; when it has read all of
//           its groups, done_seq = seq (release).
// Groups filled by MPI (ranks on other nodes) have no flags: their receive requests complete instead.
//
// Every wait has the buffer's timeout, keeps MPI progressing (a peer may need our sends to make its
// own progress), checks that a waited-for peer on this host is still alive, and watches the host-wide
// abort word: the first rank that detects a failure records a message there, so every surviving rank
// on the host raises an error naming the failed peer and the operation instead of hanging.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ep/transport/net.h"
#include "ep/transport/shm_segment.h"
#include "tessera/core/memory.h"
#include "tessera/ep/group.h"

namespace tessera::ep::detail {

struct alignas(64) GroupFlag {
  std::atomic<uint64_t> ready_seq;
  std::atomic<int64_t> count;
  // Direct receive (output_arena.h): the writer's token count before any data moves (early_seq), and
  // the row where the owner placed the writer's tokens in its output (published with out_seq).
  std::atomic<uint64_t> early_seq;
  std::atomic<int64_t> early_count;
  std::atomic<int64_t> out_row;
  // In-place combine: the writer's contribution rows stay in its own arena; the owner reads them from
  // there (byte offset of the first row, row pitch) when in_place_seq is this operation's.
  std::atomic<uint64_t> in_place_seq;
  std::atomic<int64_t> in_place_offset;
  std::atomic<int64_t> in_place_pitch;
};
static_assert(sizeof(GroupFlag) == 64, "one cache line per group flag");

struct alignas(64) RegionControl {
  alignas(64) std::atomic<uint64_t> done_seq;
  alignas(64) std::atomic<uint64_t> out_seq;  // direct receive: out_offset is valid for this operation
  std::atomic<int64_t> out_offset;            // byte offset of the owner's output in its arena, -1 = none
};

struct ArenaState;

class Comm {
 public:
  // Collective over the group. group_bytes: bytes per group slot area (rounded up to 4 KiB);
  // arena_bytes: shared output arena per rank for direct receive (0: none; see output_arena.h).
  Comm(std::shared_ptr<Group> group, int64_t group_bytes, double timeout_s, std::string owner, int64_t arena_bytes = 0);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  const Topology& topo() const { return group_->topology(); }
  Group& group() const { return *group_; }
  const Net& net() const;
  int64_t group_bytes() const { return group_bytes_; }
  double timeout_s() const { return timeout_s_; }
  int threads() const { return threads_; }
  void set_threads(int n);  // n <= 0: the default (pool threads / ranks on this host)

  // Group g of the region of local rank `local` on this node.
  char* area(int local, int g) const;

  // ---- operations ----
  // Starts operation `op` (e.g. "ElasticBuffer.dispatch"): throws if an earlier failure broke the
  // buffer; returns its sequence number.
  uint64_t begin(const char* op);
  const std::string& op() const { return op_; }
  // Names the caller in wait errors without starting a collective operation (pp_send / pp_recv,
  // all_gather, engram calls); throws like begin() when an earlier failure broke the buffer.
  void name_op(const char* op);
  uint64_t seq() const { return seq_; }
  void wait_done(int local, uint64_t seq);  // `local` finished reading operation seq - 1
  // Publishes group g of local rank `local`. The fault test kills a rank here and in isend
  // (TESSERA_EP_TEST_KILL=rank:seq: that rank dies with SIGKILL at its first publish or MPI send of
  // operation seq, i.e. with data half written into its peers' regions).
  void publish(int local, int g, int64_t count, uint64_t seq);
  int64_t wait_ready(int g, uint64_t seq, int writer_rank);
  void mark_done(uint64_t seq);

  // ---- direct receive (output_arena.h) ----
  bool has_arena() const { return arena_ != nullptr; }
  const std::shared_ptr<ArenaState>& arena() const { return arena_; }
  char* arena_data(int local) const;
  void publish_early_count(int local, int64_t count, uint64_t seq);
  int64_t wait_early_count(int src_rank, uint64_t seq);
  // The owner's output for operation seq: byte offset in its arena (-1: none) and the first row of
  // each source's tokens.
  void publish_output(int64_t offset, const std::vector<int64_t>& first_row, uint64_t seq);
  int64_t wait_output(int local, uint64_t seq, int64_t* my_first_row);

  // ---- in-place combine ----
  // Byte offset of [p, p + bytes) in this rank's arena, or -1 when it is not wholly inside.
  int64_t own_arena_offset(const void* p, int64_t bytes) const;
  // Before publish(local, g, ...): group g's rows are at `offset` (pitch bytes apart) in this rank's arena.
  void publish_in_place(int local, int g, int64_t offset, int64_t pitch, uint64_t seq);
  // After wait_ready(g, seq, ...): where the writer's rows are, or null when they came through the slots.
  const char* in_place_rows(int g, uint64_t seq, int writer_local, int64_t* pitch) const;
  // Blocks until `local` finished reading operation seq (its done_seq >= seq): rows it read in place
  // from this rank's arena may then be overwritten by the caller.
  void wait_read(int local, uint64_t seq);

  // ---- MPI transfers of the current operation ----
  TransferSet& transfers() { return transfers_; }
  void isend(const void* data, size_t bytes, int peer, int stream);
  size_t irecv(void* data, size_t max_bytes, int peer, int stream);  // returns the entry index
  size_t wait_transfer(size_t index);                                // returns the byte count
  void wait_all_transfers();

  // Polls `ready` with the buffer's failure checks; `peer` is the rank whose action we wait for.
  template <class Ready>
  void wait(Ready&& ready, int peer, const char* what) {
    if (ready()) return;
    const int64_t start = start_wait();
    for (uint32_t i = 1;; ++i) {
      if (ready()) return;
      if ((i & 31) == 0) {
        const WaitFailure f = poll_slow(start, peer, what);
        if (f.failed) {
          // A peer may publish and then die (or the deadline pass) between the check above and the
          // poll: its data is complete, so only a wait that is still unmet fails.
          if (ready()) return;
          raise_failure(f);
        }
      } else {
        relax();
      }
    }
  }

  // Marks the buffer broken, tells the other ranks of this host, and throws Error(kRuntime).
  [[noreturn]] void fail_peer(int peer, const std::string& message);
  bool broken() const { return broken_; }

  // Private pre-faulted scratch memory that grows on demand (inter-node staging).
  char* staging(int slot, size_t bytes);

 private:
  struct HostBlock;
  int64_t start_wait();
  // What poll_slow found: nothing yet, or a failure that ends the wait unless it was met meanwhile.
  struct WaitFailure {
    bool failed = false;
    bool host_broken = false;  // another rank of this host reported a failure (message: its report)
    int peer = -1;
    std::string message;
  };
  // Progresses transfers, checks the host's failure flag, the peer's process and the deadline, and
  // backs off during long waits.
  WaitFailure poll_slow(int64_t start, int peer, const char* what);
  [[noreturn]] void raise_failure(const WaitFailure& f);
  static void relax();
  std::string op_number() const;  // " (operation N of this buffer)" for dispatch/combine-like calls
  void progress_transfers();
  RegionControl* control(int local) const;
  GroupFlag* flags(int local) const;

  std::shared_ptr<Group> group_;
  int64_t group_bytes_ = 0;
  double timeout_s_ = 300;
  std::string owner_, op_;
  uint64_t seq_ = 0;
  int threads_ = 1, default_threads_ = 1;
  bool oversubscribed_ = false;
  bool broken_ = false;
  bool numbered_op_ = false;  // op_ was started by begin() (a collective, numbered operation)
  std::string broken_message_;
  uint64_t kill_at_seq_ = 0;  // fault injection for the fault test (TESSERA_EP_TEST_KILL=rank:seq)
  size_t control_bytes_ = 0;
  ShmSegment host_segment_;
  std::vector<ShmSegment> regions_;      // by local rank on this node
  std::shared_ptr<ArenaState> arena_;    // this rank's output arena (outlives the Comm while tensors use it)
  std::vector<ShmSegment> peer_arenas_;  // by local rank; this rank's own entry stays empty
  TransferSet transfers_;
  std::vector<AlignedPtr<char>> staging_;
  std::vector<size_t> staging_bytes_;
};

}  // namespace tessera::ep::detail
