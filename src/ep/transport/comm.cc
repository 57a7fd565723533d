#include "ep/transport/comm.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/spin_hints.h"
#include "ep/transport/group_state.h"
#include "ep/transport/node_segments.h"
#include "ep/transport/output_arena.h"
#include "tessera/core/error.h"
#include "tessera/core/thread_pool.h"
#include "tessera/core/timer.h"

namespace tessera::ep::detail {

// The host-wide failure record: state 0 = none, 1 = being written, 2 = message valid.
struct Comm::HostBlock {
  alignas(64) std::atomic<uint32_t> state;
  char message[2048];
};

namespace {

constexpr size_t kPage = 4096;

size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

std::string segment_name(uint64_t nonce, uint64_t counter, const char* kind, int index) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "/tessera-ep-%016llx-%llu-%s%d", (unsigned long long)nonce,
                (unsigned long long)counter, kind, index);
  return buf;
}

bool process_alive(int pid) {
  if (pid <= 0) return true;
  return !(kill(pid, 0) != 0 && errno == ESRCH);
}

}  // namespace

Comm::Comm(std::shared_ptr<Group> group, int64_t group_bytes, double timeout_s, std::string owner, int64_t arena_bytes)
    : group_(std::move(group)), timeout_s_(timeout_s), owner_(std::move(owner)) {
  TESSERA_CHECK(timeout_s > 0, owner_, ": argument 'num_cpu_timeout_secs' must be > 0, got ", timeout_s);
  GroupState& st = group_->state();
  const Topology& t = topo();
  group_bytes_ = int64_t(round_up(size_t(std::max<int64_t>(group_bytes, 1)), kPage));
  control_bytes_ = round_up(sizeof(RegionControl) + size_t(t.num_ranks) * sizeof(GroupFlag), kPage);
  const size_t region_bytes = control_bytes_ + size_t(t.num_ranks) * size_t(group_bytes_);
  const uint64_t counter = st.segments_made.fetch_add(1);
  const int host_ranks = st.host_net->size();
  threads_ = default_threads_ = std::max(1, num_threads() / std::max(1, host_ranks));
  oversubscribed_ = host_ranks * threads_ > int(std::thread::hardware_concurrency());

  // Host block: made by the host's first rank, mapped by all, unlinked once everyone has it.
  const std::string host_name = segment_name(st.nonce, counter, "h", t.host);
  if (st.host_net->rank() == 0) host_segment_ = ShmSegment::create(host_name, kPage);
  st.host_net->barrier(kSetupTimeoutS, "tessera.ep: host segment creation");
  if (st.host_net->rank() != 0) host_segment_ = ShmSegment::open(host_name, kPage);
  st.host_net->barrier(kSetupTimeoutS, "tessera.ep: host segment mapping");
  host_segment_.unlink();

  // Regions: each rank makes its own; the node's ranks map each other's.
  regions_ = map_node_segments(*group_, "r", region_bytes, "region");

  // Output arenas (direct receive), the same way.
  if (arena_bytes > 0) {
    peer_arenas_ = map_node_segments(*group_, "a", round_up(size_t(arena_bytes), size_t(64) << 10), "arena");
    arena_ = make_arena(std::move(peer_arenas_[size_t(t.local_rank)]));  // this rank's own entry stays empty
  }
  if (const char* kill = std::getenv("TESSERA_EP_TEST_KILL")) {
    int rank = -1;
    unsigned long long at = 0;
    if (std::sscanf(kill, "%d:%llu", &rank, &at) == 2 && rank == t.rank) kill_at_seq_ = at;
  }
  staging_.resize(8);
  staging_bytes_.assign(8, 0);
}

Comm::~Comm() = default;

const Net& Comm::net() const {
  return *group_->state().net;
}

void Comm::set_threads(int n) {
  threads_ = n > 0 ? n : default_threads_;
}

RegionControl* Comm::control(int local) const {
  return reinterpret_cast<RegionControl*>(regions_[size_t(local)].data());
}

GroupFlag* Comm::flags(int local) const {
  return reinterpret_cast<GroupFlag*>(regions_[size_t(local)].data() + sizeof(RegionControl));
}

char* Comm::area(int local, int g) const {
  return regions_[size_t(local)].data() + control_bytes_ + size_t(g) * size_t(group_bytes_);
}

void Comm::name_op(const char* op) {
  op_ = std::string(op);
  numbered_op_ = false;
  if (broken_)
    fail(ErrorCode::kRuntime, op_,
         ": the buffer is unusable after an earlier communication failure: ", broken_message_);
}

uint64_t Comm::begin(const char* op) {
  name_op(op);
  numbered_op_ = true;
  TESSERA_CHECK(transfers_.pending() == 0, op_, ": internal error: transfers of the previous operation are pending");
  transfers_ = TransferSet{};
  return ++seq_;
}

void Comm::wait_done(int local, uint64_t seq) {
  if (seq <= 1) return;
  const RegionControl* c = control(local);
  const int peer = topo().node_ranks[size_t(topo().node)][size_t(local)];
  wait([&] { return c->done_seq.load(std::memory_order_acquire) >= seq - 1; }, peer,
       "finish reading the previous operation (so its receive region can be reused)");
}

void Comm::publish(int local, int g, int64_t count, uint64_t seq) {
  if (seq == kill_at_seq_) raise(SIGKILL);
  GroupFlag& f = flags(local)[g];
  f.count.store(count, std::memory_order_relaxed);
  f.ready_seq.store(seq, std::memory_order_release);
}

int64_t Comm::wait_ready(int g, uint64_t seq, int writer_rank) {
  GroupFlag& f = flags(topo().local_rank)[g];
  wait([&] { return f.ready_seq.load(std::memory_order_acquire) == seq; }, writer_rank,
       "publish its data for this call");
  return f.count.load(std::memory_order_relaxed);
}

char* Comm::arena_data(int local) const {
  return local == topo().local_rank ? arena_->segment.data() : peer_arenas_[size_t(local)].data();
}

void Comm::publish_early_count(int local, int64_t count, uint64_t seq) {
  if (seq == kill_at_seq_) raise(SIGKILL);
  GroupFlag& f = flags(local)[topo().rank];
  f.early_count.store(count, std::memory_order_relaxed);
  f.early_seq.store(seq, std::memory_order_release);
}

int64_t Comm::wait_early_count(int src_rank, uint64_t seq) {
  GroupFlag& f = flags(topo().local_rank)[src_rank];
  wait([&] { return f.early_seq.load(std::memory_order_acquire) == seq; }, src_rank, "announce its token counts");
  return f.early_count.load(std::memory_order_relaxed);
}

void Comm::publish_output(int64_t offset, const std::vector<int64_t>& first_row, uint64_t seq) {
  GroupFlag* f = flags(topo().local_rank);
  for (size_t s = 0; s < first_row.size(); ++s) f[s].out_row.store(first_row[s], std::memory_order_relaxed);
  RegionControl* c = control(topo().local_rank);
  c->out_offset.store(offset, std::memory_order_relaxed);
  c->out_seq.store(seq, std::memory_order_release);
}

int64_t Comm::wait_output(int local, uint64_t seq, int64_t* my_first_row) {
  const RegionControl* c = control(local);
  const int peer = topo().node_ranks[size_t(topo().node)][size_t(local)];
  wait([&] { return c->out_seq.load(std::memory_order_acquire) == seq; }, peer, "place its output for this call");
  *my_first_row = flags(local)[topo().rank].out_row.load(std::memory_order_relaxed);
  return c->out_offset.load(std::memory_order_relaxed);
}

int64_t Comm::own_arena_offset(const void* p, int64_t bytes) const {
  if (!arena_ || !p) return -1;
  const char* base = arena_->segment.data();
  const char* at = static_cast<const char*>(p);
  if (at < base || bytes < 0 || at + bytes > base + arena_->segment.size()) return -1;
  return at - base;
}

void Comm::publish_in_place(int local, int g, int64_t offset, int64_t pitch, uint64_t seq) {
  GroupFlag& f = flags(local)[g];
  f.in_place_offset.store(offset, std::memory_order_relaxed);
  f.in_place_pitch.store(pitch, std::memory_order_relaxed);
  f.in_place_seq.store(seq, std::memory_order_relaxed);  // ordered by publish()'s release store
}

const char* Comm::in_place_rows(int g, uint64_t seq, int writer_local, int64_t* pitch) const {
  const GroupFlag& f = flags(topo().local_rank)[g];
  if (!arena_ || f.in_place_seq.load(std::memory_order_relaxed) != seq) return nullptr;
  *pitch = f.in_place_pitch.load(std::memory_order_relaxed);
  return arena_data(writer_local) + f.in_place_offset.load(std::memory_order_relaxed);
}

void Comm::wait_read(int local, uint64_t seq) {
  const RegionControl* c = control(local);
  const int peer = topo().node_ranks[size_t(topo().node)][size_t(local)];
  wait([&] { return c->done_seq.load(std::memory_order_acquire) >= seq; }, peer,
       "finish reading this rank's combine input in place");
}

void Comm::mark_done(uint64_t seq) {
  control(topo().local_rank)->done_seq.store(seq, std::memory_order_release);
}

void Comm::isend(const void* data, size_t bytes, int peer, int stream) {
  if (seq_ == kill_at_seq_) raise(SIGKILL);
  net().isend(transfers_, data, bytes, peer, stream * 4096 + int(seq_ % 4096));
}

size_t Comm::irecv(void* data, size_t max_bytes, int peer, int stream) {
  net().irecv(transfers_, data, max_bytes, peer, stream * 4096 + int(seq_ % 4096));
  return transfers_.entries.size() - 1;
}

size_t Comm::wait_transfer(size_t index) {
  const TransferSet::Entry& e = transfers_.entries[index];
  wait([&] { return net().test(transfers_, index, op_.c_str()); }, e.peer,
       e.is_recv ? "send its data over MPI" : "receive our data over MPI");
  return transfers_.entries[index].bytes;
}

void Comm::wait_all_transfers() {
  for (size_t i = 0; i < transfers_.entries.size(); ++i) wait_transfer(i);
}

void Comm::progress_transfers() {
  for (size_t i = 0; i < transfers_.entries.size(); ++i)
    if (!transfers_.entries[i].done) net().test(transfers_, i, op_.c_str());
}

int64_t Comm::start_wait() {
  return now_ns();
}

void Comm::relax() {
  cpu_relax();
}

Comm::WaitFailure Comm::poll_slow(int64_t start, int peer, const char* what) {
  WaitFailure f;
  const HostBlock* hb = reinterpret_cast<const HostBlock*>(host_segment_.data());
  if (hb->state.load(std::memory_order_acquire) == 2) {
    f.failed = f.host_broken = true;
    f.message = hb->message;
    return f;
  }
  if (transfers_.pending()) progress_transfers();
  const double waited = double(now_ns() - start) * 1e-9;
  const Topology& t = topo();
  if (peer >= 0 && t.same_host(peer, t.rank) && !process_alive(t.pid_of[size_t(peer)])) {
    // A rank that reported a failure and then exited looks dead too; it published that failure before
    // exiting, so this second look names the real cause (else, descheduled between the first look and
    // this one, a survivor blamed the rank that had reported it).
    if (hb->state.load(std::memory_order_acquire) == 2) {
      f.failed = f.host_broken = true;
      f.message = hb->message;
      return f;
    }
    f.failed = true;
    f.peer = peer;
    f.message = op_ + ": rank " + std::to_string(peer) + " (pid " + std::to_string(t.pid_of[size_t(peer)]) +
                ") died while rank " + std::to_string(t.rank) + " waited for it to " + what + op_number();
    return f;
  }
  if (waited > timeout_s_) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", timeout_s_);
    f.failed = true;
    f.peer = peer;
    f.message = op_ + ": rank " + std::to_string(t.rank) + " timed out after " + secs + " s waiting for rank " +
                std::to_string(peer) + " to " + what + op_number() +
                "; that rank is stuck, died on another host, or is not running the same sequence of calls (every "
                "rank must call the buffer's collective methods in the same order)";
    return f;
  }
  // Back off: yield when other processes need this CPU, sleep during long waits.
  if (oversubscribed_ || waited > 1e-3) sched_yield();
  if (waited > 0.05) usleep(50);
  return f;
}

void Comm::raise_failure(const WaitFailure& f) {
  if (!f.host_broken) fail_peer(f.peer, f.message);
  broken_ = true;
  broken_message_ = f.message;
  note_communication_failure();
  fail(ErrorCode::kRuntime, op_, ": rank ", topo().rank,
       " stopped waiting because communication failed on this host: ", broken_message_);
}

std::string Comm::op_number() const {
  return numbered_op_ ? " (operation " + std::to_string(seq_) + " of this buffer)" : std::string();
}

void Comm::fail_peer(int peer, const std::string& message) {
  broken_ = true;
  broken_message_ = message;
  note_communication_failure();
  HostBlock* hb = reinterpret_cast<HostBlock*>(host_segment_.data());
  uint32_t expected = 0;
  if (hb->state.compare_exchange_strong(expected, 1)) {
    std::snprintf(hb->message, sizeof hb->message, "%s", message.c_str());
    hb->state.store(2, std::memory_order_release);
  }
  (void)peer;
  fail(ErrorCode::kRuntime, message);
}

char* Comm::staging(int slot, size_t bytes) {
  if (staging_bytes_[size_t(slot)] < bytes) {
    staging_[size_t(slot)].reset();
    staging_[size_t(slot)] = aligned_array<char>(bytes);
    prefault(staging_[size_t(slot)].get(), bytes);
    staging_bytes_[size_t(slot)] = bytes;
  }
  return staging_[size_t(slot)].get();
}

}  // namespace tessera::ep::detail
