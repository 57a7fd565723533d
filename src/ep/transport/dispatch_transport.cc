// Dispatch transport: records go straight into the receivers' fixed slots (one copy inside a node),
// over MPI to other nodes (direct: per destination rank; hybrid: per destination node, then forwarded).
#include <algorithm>

#include "ep/common/active_kernels.h"
#include "ep/common/parallel_range.h"
#include "ep/transport/transport.h"
#include "tessera/core/error.h"

namespace tessera::ep::detail {
namespace {

// Tokens of `r` with at least one expert on a rank of `node`, ascending.
std::vector<int32_t> bundle_for_node(const Routing& r, const Topology& t, int node) {
  std::vector<int32_t> bundle;
  for (int64_t tok = 0; tok < r.num_tokens; ++tok) {
    for (int k = 0; k < r.num_topk; ++k) {
      const int dst = r.rank_of_lane(tok, k);
      if (dst >= 0 && t.node_of[size_t(dst)] == node) {
        bundle.push_back(int32_t(tok));
        break;
      }
    }
  }
  return bundle;
}

void check_capacity(const Comm& comm, const DispatchPlan& plan) {
  const int64_t need = plan.rec.bytes(plan.num_max);
  if (need > comm.group_bytes())
    fail(ErrorCode::kInvalidArgument, comm.op(), ": the buffer is too small: num_max_tokens_per_rank=", plan.num_max,
         " tokens of ", plan.rec.per_token(), " bytes need ", need, " bytes per source rank, the buffer has ",
         comm.group_bytes(), " (", comm.group_bytes() * comm.topo().num_ranks,
         " in all); create it with a larger num_bytes or use get_buffer_size_hint()");
  for (int d = 0; d < plan.routing->num_ranks; ++d)
    TESSERA_CHECK(plan.routing->sent_tokens(d) <= plan.num_max, comm.op(), ": ", plan.routing->num_tokens,
                  " tokens exceed num_max_tokens_per_rank=", plan.num_max);
}

int64_t count_from_bytes(const Comm& comm, size_t bytes, int64_t per_token, int peer, int64_t num_max) {
  const int64_t count = int64_t(bytes) / per_token;
  if (int64_t(bytes) % per_token != 0 || count > num_max)
    fail(ErrorCode::kRuntime, comm.op(), ": rank ", peer, " sent ", bytes, " bytes, not a whole number (<= ", num_max,
         ") of ", per_token,
         "-byte records: the ranks disagree on hidden, num_topk, dtypes or num_max_tokens_per_rank");
  return count;
}

// Hybrid: forwards the bundle from node N's rail peer into this node's ranks.
void forward_bundle(Comm& comm, uint64_t seq, const DispatchPlan& plan, DispatchState& st, int node,
                    const TokenRows& bundle) {
  const Topology& t = comm.topo();
  const int L = t.num_local_ranks, K = plan.rec.num_topk;
  const int p = t.rail_peer(t.rank, node);
  const int experts_per_rank = plan.routing->experts_per_rank;
  ForwardPlan& fwd = st.fwd;
  const int64_t n = bundle.count;
  fwd.fwd_count[size_t(node)] = n;
  fwd.fwd_slot[size_t(node)].assign(size_t(n * L), -1);
  fwd.fwd_idx[size_t(node)].resize(size_t(n * K));
  for (int64_t b = 0; b < n; ++b)
    std::copy_n(bundle.idx + b * bundle.idx_stride, K, fwd.fwd_idx[size_t(node)].begin() + b * K);
  std::vector<std::vector<int32_t>> picks(static_cast<size_t>(L));
  for (int64_t b = 0; b < n; ++b) {
    for (int k = 0; k < K; ++k) {
      const int64_t e = bundle.idx[b * bundle.idx_stride + k];
      if (e < 0) continue;
      const int dst = int(e / experts_per_rank);
      if (t.node_of[size_t(dst)] != t.node) continue;
      const int l = t.local_of[size_t(dst)];
      int32_t& slot = fwd.fwd_slot[size_t(node)][size_t(b * L + l)];
      if (slot < 0) {
        slot = int32_t(picks[size_t(l)].size());
        picks[size_t(l)].push_back(int32_t(b));
      }
    }
  }
  for (int l = 0; l < L; ++l) {
    const auto& list = picks[size_t(l)];
    if (l == t.local_rank) {
      st.self_picks[size_t(node)] = list;
      const auto& kept = st.self_picks[size_t(node)];
      st.groups[size_t(p)] = GroupData{bundle, kept.data(), int64_t(kept.size())};
      continue;
    }
    comm.wait_done(l, seq);
    write_dispatch_records(comm.area(l, p), plan.num_max, plan.rec, bundle, list.data(), int64_t(list.size()),
                           plan.hidden_bytes, plan.sf_bytes, comm.threads());
    comm.publish(l, p, int64_t(list.size()), seq);
  }
}

// Direct receive: every token's x row, once per destination that placed its output in shared memory,
// token by token so the row is read from memory once and then from cache.
void write_direct_rows(const DispatchPlan& plan, int threads) {
  const Routing& r = *plan.routing;
  const std::vector<char*>& x_at = *plan.direct_x;
  const cpu::EpKernels& k = kernels();
  parallel_range(threads, r.num_tokens, [&](int64_t t0, int64_t t1) {
    if (!r.dest_mask.empty()) {
      // Per destination the running slot (the token's index in its send list), from the chunk start.
      std::vector<int64_t> next(static_cast<size_t>(r.num_ranks));
      for (int d = 0; d < r.num_ranks; ++d) {
        const auto& list = r.send_list[size_t(d)];
        next[size_t(d)] = std::lower_bound(list.begin(), list.end(), int32_t(t0)) - list.begin();
      }
      for (int64_t t = t0; t < t1; ++t)
        for (uint64_t m = r.dest_mask[size_t(t)]; m; m &= m - 1) {
          const int d = __builtin_ctzll(m);
          const int64_t slot = next[size_t(d)]++;
          if (x_at[size_t(d)])
            k.copy(x_at[size_t(d)] + slot * plan.hidden_bytes, plan.own.x + t * plan.own.x_stride,
                   size_t(plan.hidden_bytes), 1);
        }
      k.store_fence();
      return;
    }
    // More than 64 ranks: per destination its tokens in this chunk, from the send lists (which also
    // hold the tokens of a legacy dispatch without topk_idx, whose tokens have no lanes).
    for (int d = 0; d < r.num_ranks; ++d) {
      if (!x_at[size_t(d)]) continue;
      const auto& list = r.send_list[size_t(d)];
      for (auto it = std::lower_bound(list.begin(), list.end(), int32_t(t0)); it != list.end() && *it < t1; ++it)
        k.copy(x_at[size_t(d)] + int64_t(it - list.begin()) * plan.hidden_bytes, plan.own.x + *it * plan.own.x_stride,
               size_t(plan.hidden_bytes), 1);
    }
    k.store_fence();
  });
}

}  // namespace

void dispatch_send(Comm& comm, uint64_t seq, const DispatchPlan& plan, DispatchState& st) {
  check_capacity(comm, plan);
  const Topology& t = comm.topo();
  const Routing& r = *plan.routing;
  const int R = t.num_ranks, me = t.rank;
  const bool hybrid = plan.mode == Mode::kHybrid;
  const int64_t full = plan.rec.bytes(plan.num_max);
  st.groups.assign(size_t(R), GroupData{});
  st.recv_entry.assign(size_t(R), -1);
  st.self_picks.assign(size_t(t.num_nodes), {});
  st.fwd = ForwardPlan{};
  st.fwd.fwd_slot.resize(size_t(t.num_nodes));
  st.fwd.fwd_idx.resize(size_t(t.num_nodes));
  st.fwd.fwd_count.assign(size_t(t.num_nodes), 0);
  st.fwd.bundle_pos.resize(size_t(t.num_nodes));
  std::vector<int64_t> bundle_entry(size_t(t.num_nodes), -1);

  // 1. Receives from other nodes.
  char* recv_stage = hybrid ? comm.staging(kStageRecv, size_t(full) * size_t(t.num_nodes)) : nullptr;
  for (int s = 0; s < R && !hybrid; ++s)
    if (!t.same_node(s, me))
      st.recv_entry[size_t(s)] = int64_t(comm.irecv(comm.area(t.local_rank, s), size_t(full), s, kStreamDispatch));
  for (int node = 0; node < t.num_nodes && hybrid; ++node)
    if (node != t.node)
      bundle_entry[size_t(node)] = int64_t(
          comm.irecv(recv_stage + size_t(node) * size_t(full), size_t(full), t.rail_peer(me, node), kStreamBundle));

  // 2. Sends to other nodes, packed compactly (the message size carries the count).
  if (!hybrid) {
    int64_t total = 0;
    for (int d = 0; d < R; ++d)
      if (!t.same_node(d, me)) total += plan.rec.bytes(r.sent_tokens(d));
    char* stage = comm.staging(kStageSend, size_t(std::max<int64_t>(total, 16)));
    for (int d = 0; d < R; ++d) {
      if (t.same_node(d, me)) continue;
      const int64_t n = r.sent_tokens(d);
      write_dispatch_records(stage, n, plan.rec, plan.own, r.send_list[size_t(d)].data(), n, plan.hidden_bytes,
                             plan.sf_bytes, comm.threads());
      comm.isend(stage, size_t(plan.rec.bytes(n)), d, kStreamDispatch);
      stage += plan.rec.bytes(n);
    }
  } else {
    char* stage = comm.staging(kStageSend, size_t(full) * size_t(t.num_nodes));
    for (int node = 0; node < t.num_nodes; ++node) {
      if (node == t.node) continue;
      const std::vector<int32_t> bundle = bundle_for_node(r, t, node);
      auto& pos = st.fwd.bundle_pos[size_t(node)];
      pos.assign(size_t(r.num_tokens), -1);
      for (size_t b = 0; b < bundle.size(); ++b) pos[size_t(bundle[b])] = int32_t(b);
      const int64_t n = int64_t(bundle.size());
      char* area = stage + size_t(node) * size_t(full);
      write_dispatch_records(area, n, plan.rec, plan.own, bundle.data(), n, plan.hidden_bytes, plan.sf_bytes,
                             comm.threads());
      comm.isend(area, size_t(plan.rec.bytes(n)), t.rail_peer(me, node), kStreamBundle);
    }
  }

  // 3. This rank's tokens for the other ranks of its node: straight into their slots (x into their
  // outputs when they placed them in shared memory).
  if (plan.direct_x) write_direct_rows(plan, comm.threads());
  for (int l = 0; l < t.num_local_ranks; ++l) {
    if (l == t.local_rank) continue;
    const int d = t.node_ranks[size_t(t.node)][size_t(l)];
    const auto& list = r.send_list[size_t(d)];
    const bool direct = plan.direct_x && (*plan.direct_x)[size_t(d)];
    comm.wait_done(l, seq);
    write_dispatch_records(comm.area(l, me), plan.num_max, plan.rec, plan.own, list.data(), int64_t(list.size()),
                           direct ? 0 : plan.hidden_bytes, plan.sf_bytes, comm.threads());
    comm.publish(l, me, int64_t(list.size()), seq);
  }

  // 4. Hybrid: forward what the rail peers sent.
  for (int node = 0; node < t.num_nodes && hybrid; ++node) {
    if (node == t.node) continue;
    const size_t bytes = comm.wait_transfer(size_t(bundle_entry[size_t(node)]));
    const int p = t.rail_peer(me, node);
    const int64_t n = count_from_bytes(comm, bytes, plan.rec.per_token(), p, plan.num_max);
    forward_bundle(comm, seq, plan, st, node,
                   rows_of_area(recv_stage + size_t(node) * size_t(full), n, n, plan.rec, true));
  }
}

void dispatch_receive(Comm& comm, uint64_t seq, const DispatchPlan& plan, DispatchState& st) {
  const Topology& t = comm.topo();
  const int me = t.rank;
  const bool hybrid = plan.mode == Mode::kHybrid;
  for (int s = 0; s < t.num_ranks; ++s) {
    if (s == me) {
      const auto& list = plan.routing->send_list[size_t(me)];
      st.groups[size_t(s)] = GroupData{plan.own, list.data(), int64_t(list.size())};
    } else if (hybrid && !t.same_node(s, me) && t.rail_peer(s, t.node) == me) {
      continue;  // forwarded by this rank itself (dispatch_send)
    } else if (t.same_node(s, me) || hybrid) {
      const int writer = t.same_node(s, me) ? s : t.rail_peer(s, t.node);
      const int64_t n = comm.wait_ready(s, seq, writer);
      if (n < 0 || n > plan.num_max)
        fail(ErrorCode::kRuntime, comm.op(), ": rank ", writer, " published ", n,
             " tokens (> num_max_tokens_per_rank=", plan.num_max, "): the ranks disagree on num_max_tokens_per_rank");
      st.groups[size_t(s)] =
          GroupData{rows_of_area(comm.area(t.local_rank, s), plan.num_max, n, plan.rec, true), nullptr, n};
    } else {
      const size_t bytes = comm.wait_transfer(size_t(st.recv_entry[size_t(s)]));
      const int64_t n = count_from_bytes(comm, bytes, plan.rec.per_token(), s, plan.num_max);
      st.groups[size_t(s)] = GroupData{rows_of_area(comm.area(t.local_rank, s), n, n, plan.rec, true), nullptr, n};
    }
  }
  for (GroupData& g : st.groups) g.x_in_place = plan.x_in_place;
}

void transport_finish(Comm& comm, uint64_t seq) {
  comm.wait_all_transfers();
  comm.mark_done(seq);
}

}  // namespace tessera::ep::detail
