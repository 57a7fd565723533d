// Net over MPI (Open MPI). Communicators are duplicates with MPI_ERRORS_RETURN, so a failing peer
// becomes an error we can name instead of an abort of the whole job.
#include <mpi.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ep/transport/net.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"

namespace tessera::ep::detail {

struct Net::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

namespace {

std::atomic<bool> g_we_initialised{false};
std::atomic<bool> g_failure{false};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !g_failure.load()) MPI_Finalize();
}

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, size_t(len));
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) fail(ErrorCode::kRuntime, what, " failed: ", mpi_error_text(rc));
}

// Every ep message is a whole number of these, so counts stay small ints.
MPI_Datatype unit_type() {
  static MPI_Datatype type = [] {
    MPI_Datatype t;
    MPI_Type_contiguous(16, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    return t;
  }();
  return type;
}

std::unique_ptr<Net> wrap(MPI_Comm comm) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  auto impl = std::make_unique<Net::Impl>();
  impl->comm = comm;
  return std::make_unique<Net>(std::move(impl));
}

std::unique_ptr<Net> dup_of(MPI_Comm comm, const char* what) {
  MPI_Comm copy;
  check_mpi(MPI_Comm_dup(comm, &copy), what);
  return wrap(copy);
}

// Polls a request until it completes or the deadline passes.
void wait_request(MPI_Request* req, double timeout_s, const char* what) {
  const int64_t start = now_ns();
  for (;;) {
    int flag = 0;
    check_mpi(MPI_Test(req, &flag, MPI_STATUS_IGNORE), what);
    if (flag) return;
    if (double(now_ns() - start) * 1e-9 > timeout_s) {
      note_communication_failure();
      fail(ErrorCode::kRuntime, what, ": timed out after ", timeout_s,
           " s; at least one rank of the group did not join (it is stuck, died, or runs other calls)");
    }
    sched_yield();
  }
}

}  // namespace

// Here, not in net.h: the unique_ptr needs Impl complete, and each implementation has its own.
Net::Net(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Net::~Net() = default;

void note_communication_failure() {
  g_failure.store(true);
}

bool Net::init_world() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    g_we_initialised.store(true);
    std::atexit(finalize_at_exit);
  }
  return true;
}

std::unique_ptr<Net> Net::world() {
  init_world();
  return dup_of(MPI_COMM_WORLD, "MPI_Comm_dup(MPI_COMM_WORLD)");
}

std::unique_ptr<Net> Net::from_fortran(int64_t handle) {
  init_world();
  const MPI_Comm comm = MPI_Comm_f2c(MPI_Fint(handle));
  TESSERA_CHECK(comm != MPI_COMM_NULL, "tessera.ep.Group: argument 'comm' is MPI_COMM_NULL (Fortran handle ", handle,
                ")");
  return dup_of(comm, "MPI_Comm_dup(group communicator)");
}

std::unique_ptr<Net> Net::from_world_ranks(const std::vector<int>& ranks) {
  init_world();
  MPI_Group world_group, sub_group;
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
  check_mpi(MPI_Group_incl(world_group, int(ranks.size()), ranks.data(), &sub_group), "MPI_Group_incl");
  MPI_Comm comm;
  check_mpi(MPI_Comm_create_group(MPI_COMM_WORLD, sub_group, 0x7e5, &comm), "MPI_Comm_create_group");
  MPI_Group_free(&sub_group);
  MPI_Group_free(&world_group);
  TESSERA_CHECK(comm != MPI_COMM_NULL, "tessera.ep.Group: this process is not one of the listed world ranks");
  return wrap(comm);
}

int Net::rank() const {
  int r = 0;
  MPI_Comm_rank(impl_->comm, &r);
  return r;
}

int Net::size() const {
  int n = 1;
  MPI_Comm_size(impl_->comm, &n);
  return n;
}

int64_t Net::fortran_handle() const {
  return int64_t(MPI_Comm_c2f(impl_->comm));
}

std::unique_ptr<Net> Net::split(int color, int key) const {
  MPI_Comm out;
  check_mpi(MPI_Comm_split(impl_->comm, color, key, &out), "MPI_Comm_split");
  return wrap(out);
}

std::unique_ptr<Net> Net::split_shared_host() const {
  MPI_Comm out;
  check_mpi(MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &out),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
  return wrap(out);
}

void Net::allgather(const void* mine, void* all, size_t bytes, double timeout_s, const char* what) const {
  MPI_Request req;
  check_mpi(MPI_Iallgather(mine, int(bytes), MPI_BYTE, all, int(bytes), MPI_BYTE, impl_->comm, &req), what);
  wait_request(&req, timeout_s, what);
}

void Net::barrier(double timeout_s, const char* what) const {
  MPI_Request req;
  check_mpi(MPI_Ibarrier(impl_->comm, &req), what);
  wait_request(&req, timeout_s, what);
}

void Net::isend(TransferSet& set, const void* data, size_t bytes, int peer, int tag) const {
  MPI_Request req;
  check_mpi(MPI_Isend(data, int(bytes / 16), unit_type(), peer, tag, impl_->comm, &req), "MPI_Isend");
  static_assert(sizeof(MPI_Request) <= sizeof(uint64_t));
  uint64_t h = 0;
  std::memcpy(&h, &req, sizeof req);
  set.entries.push_back({peer, false, false, bytes});
  set.handles.push_back(h);
}

void Net::irecv(TransferSet& set, void* data, size_t max_bytes, int peer, int tag) const {
  MPI_Request req;
  check_mpi(MPI_Irecv(data, int(max_bytes / 16), unit_type(), peer, tag, impl_->comm, &req), "MPI_Irecv");
  uint64_t h = 0;
  std::memcpy(&h, &req, sizeof req);
  set.entries.push_back({peer, true, false, max_bytes});
  set.handles.push_back(h);
}

bool Net::test(TransferSet& set, size_t i, const char* what) const {
  TransferSet::Entry& e = set.entries[i];
  if (e.done) return true;
  MPI_Request req;
  std::memcpy(&req, &set.handles[i], sizeof req);
  int flag = 0;
  MPI_Status status;
  const int rc = MPI_Test(&req, &flag, &status);
  std::memcpy(&set.handles[i], &req, sizeof req);
  if (rc != MPI_SUCCESS) {
    note_communication_failure();
    fail(ErrorCode::kRuntime, what, ": MPI transfer ", e.is_recv ? "from" : "to", " rank ", e.peer,
         " failed: ", mpi_error_text(rc));
  }
  if (!flag) return false;
  if (e.is_recv) {
    int count = 0;
    MPI_Get_count(&status, unit_type(), &count);
    e.bytes = size_t(count) * 16;
  }
  e.done = true;
  return true;
}

}  // namespace tessera::ep::detail

namespace tessera::ep {
bool mpi_available() {
  return true;
}
}  // namespace tessera::ep
