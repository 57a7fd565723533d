// Net without MPI: a group of exactly one rank, so the ep component (and its tests) still build and
// run single-process where MPI is missing. Every multi-rank request says so.
#include <cstring>

#include "ep/transport/net.h"
#include "tessera/core/error.h"

namespace tessera::ep::detail {

struct Net::Impl {};

namespace {

[[noreturn]] void no_mpi(const char* what) {
  fail(ErrorCode::kNotImplemented, "not implemented: ", what,
       " needs MPI, and this build of tessera found no MPI (install libopenmpi-dev and rebuild)");
}

}  // namespace

// Here, not in net.h: the unique_ptr needs Impl complete, and each implementation has its own.
Net::Net(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Net::~Net() = default;

void note_communication_failure() {}

bool Net::init_world() {
  return false;
}
std::unique_ptr<Net> Net::world() {
  return std::make_unique<Net>(std::make_unique<Impl>());
}
std::unique_ptr<Net> Net::from_fortran(int64_t) {
  no_mpi("a group from an mpi4py communicator");
}
std::unique_ptr<Net> Net::from_world_ranks(const std::vector<int>&) {
  no_mpi("a group from world ranks");
}

int Net::rank() const {
  return 0;
}
int Net::size() const {
  return 1;
}
int64_t Net::fortran_handle() const {
  return -1;
}
std::unique_ptr<Net> Net::split(int, int) const {
  return std::make_unique<Net>(std::make_unique<Impl>());
}
std::unique_ptr<Net> Net::split_shared_host() const {
  return std::make_unique<Net>(std::make_unique<Impl>());
}

void Net::allgather(const void* mine, void* all, size_t bytes, double, const char*) const {
  std::memcpy(all, mine, bytes);
}
void Net::barrier(double, const char*) const {}

void Net::isend(TransferSet&, const void*, size_t, int, int) const {
  no_mpi("sending to another rank");
}
void Net::irecv(TransferSet&, void*, size_t, int, int) const {
  no_mpi("receiving from another rank");
}
bool Net::test(TransferSet&, size_t, const char*) const {
  no_mpi("a transfer between ranks");
}

}  // namespace tessera::ep::detail

namespace tessera::ep {
bool mpi_available() {
  return false;
}
}  // namespace tessera::ep
