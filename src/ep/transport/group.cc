// Group construction and topology: hosts from MPI_Comm_split_type(SHARED), nodes = hosts or pretend
// nodes of `ranks_per_node` consecutive host ranks, local indices in group-rank order.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

#include "core/env.h"
#include "ep/transport/group_state.h"
#include "tessera/core/error.h"

namespace tessera::ep {
namespace detail {
namespace {

constexpr double kSetupTimeoutS = 120;

int ranks_per_node_from(int option) {
  if (option != kRanksPerNodeFromEnv) {
    TESSERA_CHECK(option >= 0, "tessera.ep.Group: argument 'ranks_per_node' must be >= 0 (0: physical nodes), got ",
                  option);
    return option;
  }
  return int(env::integer("TESSERA_EP_RANKS_PER_NODE", 0, 0, (1 << 20) - 1));
}

struct RankInfo {
  int host_key;    // smallest group rank on this rank's host
  int host_index;  // index inside the host, in group-rank order
  int pid;
  int ranks_per_node;
};

}  // namespace

std::unique_ptr<GroupState> make_group_state(std::unique_ptr<Net> net, int ranks_per_node_option) {
  auto st = std::make_unique<GroupState>();
  const int rpn = ranks_per_node_from(ranks_per_node_option);
  const int rank = net->rank(), size = net->size();
  st->host_net = net->split_shared_host();

  // The host key: the smallest group rank on the host (gathered inside the host).
  std::vector<int> host_members(static_cast<size_t>(st->host_net->size()));
  st->host_net->allgather(&rank, host_members.data(), sizeof(int), kSetupTimeoutS, "tessera.ep.Group: host gather");
  const int host_key = *std::min_element(host_members.begin(), host_members.end());

  const RankInfo mine{host_key, st->host_net->rank(), int(getpid()), rpn};
  std::vector<RankInfo> all(size_t(size), RankInfo{});
  net->allgather(&mine, all.data(), sizeof(RankInfo), kSetupTimeoutS, "tessera.ep.Group: topology gather");
  for (int r = 0; r < size; ++r)
    TESSERA_CHECK(all[size_t(r)].ranks_per_node == rpn, "tessera.ep.Group: argument 'ranks_per_node' (or ",
                  "TESSERA_EP_RANKS_PER_NODE) must be the same on every rank; rank ", r, " uses ",
                  all[size_t(r)].ranks_per_node, ", rank ", rank, " uses ", rpn);

  Topology& t = st->topo;
  t.rank = rank;
  t.num_ranks = size;
  t.ranks_per_node_option = rpn;
  t.node_of.resize(size_t(size));
  t.local_of.resize(size_t(size));
  t.host_of.resize(size_t(size));
  t.pid_of.resize(size_t(size));
  // Hosts and nodes are numbered by their smallest rank, so the numbering is the same everywhere.
  std::map<int, int> host_number;
  std::map<std::pair<int, int>, int> node_number;
  for (int r = 0; r < size; ++r) {
    const RankInfo& info = all[size_t(r)];
    host_number.emplace(info.host_key, int(host_number.size()));
    const int sub = rpn > 0 ? info.host_index / rpn : 0;
    const auto key = std::make_pair(info.host_key, sub);
    if (!node_number.count(key)) {
      const int n = int(node_number.size());
      node_number.emplace(key, n);
      t.node_ranks.emplace_back();
    }
    const int node = node_number.at(key);
    t.host_of[size_t(r)] = host_number.at(info.host_key);
    t.node_of[size_t(r)] = node;
    t.local_of[size_t(r)] = int(t.node_ranks[size_t(node)].size());
    t.node_ranks[size_t(node)].push_back(r);
    t.pid_of[size_t(r)] = info.pid;
  }
  t.num_hosts = int(host_number.size());
  t.num_nodes = int(t.node_ranks.size());
  t.host = t.host_of[size_t(rank)];
  t.node = t.node_of[size_t(rank)];
  t.local_rank = t.local_of[size_t(rank)];
  t.num_local_ranks = int(t.node_ranks[size_t(t.node)].size());
  st->node_net = net->split(t.node, t.local_rank);

  // One random nonce for the group, drawn on rank 0, so segment names never collide across jobs.
  uint64_t nonce = 0;
  if (rank == 0)
    nonce = (uint64_t(std::random_device{}()) << 32) ^ uint64_t(std::random_device{}()) ^ uint64_t(getpid());
  std::vector<uint64_t> nonces(static_cast<size_t>(size));
  net->allgather(&nonce, nonces.data(), sizeof nonce, kSetupTimeoutS, "tessera.ep.Group: nonce gather");
  st->nonce = nonces[0];
  st->net = std::move(net);
  return st;
}

}  // namespace detail

bool Topology::uniform_nodes() const {
  for (const auto& n : node_ranks)
    if (int(n.size()) != int(node_ranks[0].size())) return false;
  return true;
}

int Topology::rail_peer(int of_rank, int to_node) const {
  const auto& ranks = node_ranks[size_t(to_node)];
  const int local = local_of[size_t(of_rank)];
  return local < int(ranks.size()) ? ranks[size_t(local)] : -1;
}

std::string Topology::describe() const {
  std::ostringstream os;
  os << num_ranks << " rank" << (num_ranks == 1 ? "" : "s") << ", " << num_nodes << " node"
     << (num_nodes == 1 ? "" : "s");
  if (uniform_nodes()) os << " x " << node_ranks[0].size();
  if (ranks_per_node_option > 0)
    os << " (pretend nodes of " << ranks_per_node_option << " on " << num_hosts << " host"
       << (num_hosts == 1 ? "" : "s") << ")";
  return os.str();
}

Group::Group(std::unique_ptr<detail::GroupState> state) : state_(std::move(state)) {}
Group::~Group() = default;

std::shared_ptr<Group> Group::world(int ranks_per_node) {
  return std::make_shared<Group>(detail::make_group_state(detail::Net::world(), ranks_per_node));
}

std::shared_ptr<Group> Group::from_fortran_handle(int64_t handle, int ranks_per_node) {
  return std::make_shared<Group>(detail::make_group_state(detail::Net::from_fortran(handle), ranks_per_node));
}

std::shared_ptr<Group> Group::from_world_ranks(const std::vector<int>& world_ranks, int ranks_per_node) {
  TESSERA_CHECK(!world_ranks.empty(), "tessera.ep.Group.from_world_ranks: argument 'world_ranks' must not be empty");
  return std::make_shared<Group>(detail::make_group_state(detail::Net::from_world_ranks(world_ranks), ranks_per_node));
}

int Group::rank() const {
  return state_->topo.rank;
}
int Group::size() const {
  return state_->topo.num_ranks;
}
const Topology& Group::topology() const {
  return state_->topo;
}
void Group::barrier(double timeout_s) {
  state_->net->barrier(timeout_s, "tessera.ep.Group.barrier");
}
int64_t Group::fortran_handle() const {
  return state_->net->fortran_handle();
}

}  // namespace tessera::ep
