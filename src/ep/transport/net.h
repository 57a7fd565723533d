// The scale-out communicator the ep component runs on: MPI in net_mpi.cc, a one-rank stand-in in
// net_self.cc when the build has no MPI. Nothing outside these two files sees an MPI type.
//
// Collective calls (split, allgather, barrier) poll with a deadline and throw Error(kRuntime) naming
// the operation when it passes. Point-to-point transfers move whole 16-byte units (every ep record is
// a multiple of 16 bytes, which keeps MPI's int counts far from overflowing); they only start here,
// Comm (comm.h) polls them with its own failure checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tessera::ep::detail {

// Outstanding transfers. Indices are stable; `peer` is the rank in the Net they were started on.
struct TransferSet {
  struct Entry {
    int peer = -1;
    bool is_recv = false;
    bool done = false;
    size_t bytes = 0;  // requested (send) / capacity, then received bytes (receive)
  };
  std::vector<Entry> entries;
  std::vector<uint64_t> handles;  // implementation-defined request handles
  size_t pending() const {
    size_t n = 0;
    for (const Entry& e : entries) n += !e.done;
    return n;
  }
};

class Net {
 public:
  struct Impl;
  explicit Net(std::unique_ptr<Impl> impl);
  ~Net();

  // Initialises the library if needed (first Group); false when this build has no MPI.
  static bool init_world();
  static std::unique_ptr<Net> world();
  static std::unique_ptr<Net> from_fortran(int64_t handle);
  // Collective over world ranks listed in `ranks` (in that order); this rank must be one of them.
  static std::unique_ptr<Net> from_world_ranks(const std::vector<int>& ranks);

  int rank() const;
  int size() const;
  int64_t fortran_handle() const;
  // MPI_Comm_split(color, key) and MPI_Comm_split_type(SHARED); collective.
  std::unique_ptr<Net> split(int color, int key) const;
  std::unique_ptr<Net> split_shared_host() const;

  void allgather(const void* mine, void* all, size_t bytes, double timeout_s, const char* what) const;
  void barrier(double timeout_s, const char* what) const;

  // Start transfers (bytes % 16 == 0); tag separates message streams.
  void isend(TransferSet& set, const void* data, size_t bytes, int peer, int tag) const;
  void irecv(TransferSet& set, void* data, size_t max_bytes, int peer, int tag) const;
  // Tests entry i once; returns true when it completed (receives then hold their byte count).
  // Throws Error(kRuntime) if the library reports an error for it.
  bool test(TransferSet& set, size_t i, const char* what) const;

 private:
  std::unique_ptr<Impl> impl_;
};

// Finalises MPI at exit when tessera initialised it, unless a communication failure happened
// (finalising with a dead peer can block forever).
void note_communication_failure();

}  // namespace tessera::ep::detail
