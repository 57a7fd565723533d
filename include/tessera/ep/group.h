// tessera/ep/group.h - the process group expert-parallel buffers communicate in, and its topology.
//
// A Group is a set of ranks started by `mpirun` (an MPI communicator underneath; MPI is only ever
// touched inside src/ep). Its topology says which ranks share a scale-up domain ("node": ranks that
// exchange data through POSIX shared memory) and which are reached over the scale-out path (MPI).
//
// Nodes are the hosts MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) finds, unless ranks_per_node > 0 splits
// each host's ranks (in rank order) into pretend nodes of that many ranks, so the inter-node paths run
// on one machine. ranks_per_node = kRanksPerNodeFromEnv reads TESSERA_EP_RANKS_PER_NODE (unset or 0:
// physical nodes). Every rank of a group must pass the same value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::ep {

constexpr int kRanksPerNodeFromEnv = -1;

struct Topology {
  int rank = 0, num_ranks = 1;
  int node = 0, num_nodes = 1;                  // scale-out index of this rank's node
  int local_rank = 0, num_local_ranks = 1;      // index inside the node, and the node's size
  int host = 0, num_hosts = 1;                  // physical hosts (pretend nodes share one)
  std::vector<int> node_of, local_of, host_of;  // per rank of the group
  std::vector<std::vector<int>> node_ranks;     // per node: its ranks by local index
  std::vector<int> pid_of;                      // process id of every rank (valid on its host)
  int ranks_per_node_option = 0;                // 0: physical nodes

  // Every node holds the same number of ranks (hybrid mode needs it: rails pair equal local indices).
  bool uniform_nodes() const;
  // The rank on `node` whose local index equals `rank`'s own local index ("rail" peer), or -1.
  int rail_peer(int of_rank, int node) const;
  bool same_node(int a, int b) const { return node_of[size_t(a)] == node_of[size_t(b)]; }
  bool same_host(int a, int b) const { return host_of[size_t(a)] == host_of[size_t(b)]; }
  std::string describe() const;  // "4 ranks, 2 nodes x 2 (pretend nodes of 2 on 1 host)"
};

namespace detail {
struct GroupState;
}

class Group {
 public:
  // All ranks of the job (MPI_COMM_WORLD). Initialises MPI if nobody did (MPI_THREAD_SERIALIZED) and
  // then finalises it at process exit.
  static std::shared_ptr<Group> world(int ranks_per_node = kRanksPerNodeFromEnv);
  // An existing communicator given by its Fortran handle (mpi4py: comm.py2f()).
  static std::shared_ptr<Group> from_fortran_handle(int64_t fortran_handle, int ranks_per_node = kRanksPerNodeFromEnv);
  // The sub-group of MPI_COMM_WORLD made of these world ranks, in this order (a torch.distributed
  // group launched by mpirun). Collective over the listed ranks only.
  static std::shared_ptr<Group> from_world_ranks(const std::vector<int>& world_ranks,
                                                 int ranks_per_node = kRanksPerNodeFromEnv);

  explicit Group(std::unique_ptr<detail::GroupState> state);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const;
  int size() const;
  const Topology& topology() const;
  // Blocks until every rank arrived; throws Error(kRuntime) naming a missing rank after timeout_s.
  void barrier(double timeout_s = 300.0);
  // The communicator's Fortran handle (for mpi4py.MPI.Comm.f2py); -1 without MPI.
  int64_t fortran_handle() const;

  detail::GroupState& state() const { return *state_; }

 private:
  std::unique_ptr<detail::GroupState> state_;
};

// Whether this build has MPI (false: only one-rank groups exist).
bool mpi_available();

}  // namespace tessera::ep
