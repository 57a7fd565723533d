// Combine transport: each rank returns, for every token it received, one contribution row (plus the
// token's topk weights) to the token's source, or in hybrid mode to the source's rail forwarder on its
// node, which reduces the node's rows into one bf16 partial and sends that back over MPI. The source
// then reduces in the order the plan names (see CombineOrder), with fp32 accumulation and one bf16
// rounding per reduction level.
#include <algorithm>

#include "ep/common/active_kernels.h"
#include "ep/common/parallel_range.h"
#include "ep/transport/transport.h"
#include "tessera/core/error.h"

namespace tessera::ep::detail {
namespace {

constexpr int kMaxTopk = 32;

struct ContribView {
  const char* rows = nullptr;
  int64_t token_pitch = 0, row_pitch = 0;
  const float* w = nullptr;
  int64_t w_pitch = 0;
  const std::vector<const uint16_t*>* table = nullptr;  // rows by pointer (rows_per = entries per token)
  int rows_per = 1;
  const uint16_t* row(int64_t j, int m = 0) const {
    if (table) return (*table)[size_t(j * rows_per + m)];
    return reinterpret_cast<const uint16_t*>(rows + j * token_pitch + m * row_pitch);
  }
  float weight(int64_t j, int k) const { return w ? w[j * w_pitch + k] : 0.0f; }
};

ContribView view_of_area(const char* area, int64_t capacity, const CombineRecord& rec) {
  ContribView v;
  v.rows = area;
  v.token_pitch = rec.token_bytes();
  v.row_pitch = rec.row_bytes;
  v.w = rec.weight_bytes ? reinterpret_cast<const float*>(area + rec.weights_off(capacity)) : nullptr;
  v.w_pitch = rec.weight_bytes / 4;
  return v;
}

ContribView self_view(const CombinePlan& plan, const char* own_area) {
  if (plan.self_lane_rows) {
    ContribView v;
    v.table = plan.self_lane_rows;
    v.rows_per = plan.rec.rows_per_token;
    return v;
  }
  if (!plan.self_rows) return view_of_area(own_area, plan.num_max, plan.rec);
  ContribView v;
  v.rows = plan.self_rows;
  v.token_pitch = plan.self_stride;
  v.row_pitch = plan.rec.row_bytes;
  v.w = plan.self_w;
  v.w_pitch = plan.self_w_stride;
  return v;
}

// rows == false: only the weights (the rows stay in place in this rank's arena).
void fill_area(const Comm& comm, const CombinePlan& plan, int s, int64_t n, char* area, int64_t capacity,
               bool streaming, bool rows = true) {
  const CombineRecord& rec = plan.rec;
  float* w = rec.weight_bytes ? reinterpret_cast<float*>(area + rec.weights_off(capacity)) : nullptr;
  if (!rows && !w) return;
  const int64_t w_pitch = rec.weight_bytes / 4;
  const bool stream = rows && streaming && n * rec.token_bytes() >= int64_t(kStreamingMinBytes);
  parallel_range(comm.threads(), n, [&](int64_t j0, int64_t j1) {
    plan.fill(s, j0, j1, rows ? area + j0 * rec.token_bytes() : nullptr, rec.token_bytes(),
              w ? w + j0 * w_pitch : nullptr, w_pitch, stream);
    if (stream) kernels().store_fence();
  });
}

int64_t checked_count(const Comm& comm, int64_t n, int64_t expected, int peer) {
  if (n != expected)
    fail(ErrorCode::kRuntime, comm.op(), ": rank ", peer, " returned ", n, " rows where ", expected,
         " were expected: the ranks passed handles of different dispatches");
  return n;
}

}  // namespace

void combine_send(Comm& comm, uint64_t seq, const CombinePlan& plan, const CombineSource& src, CombineState& st) {
  const Topology& t = comm.topo();
  const int R = t.num_ranks, me = t.rank, L = t.num_local_ranks;
  const bool hybrid = plan.mode == Mode::kHybrid;
  const CombineRecord& rec = plan.rec;
  const int64_t full = rec.bytes(plan.num_max);
  if (full > comm.group_bytes())
    fail(ErrorCode::kInvalidArgument, comm.op(),
         ": the buffer is too small: combining num_max_tokens_per_rank=", plan.num_max, " tokens of ", rec.per_token(),
         " bytes needs ", full, " bytes per source rank, the buffer has ", comm.group_bytes(),
         "; create it with a larger size (get_buffer_size_hint)");
  st.recv_entry.assign(size_t(std::max(R, t.num_nodes)), -1);
  st.partial_count.assign(size_t(t.num_nodes), 0);

  // 1. Receives: contributions of ranks on other nodes (direct) or partials of rail peers (hybrid).
  if (!hybrid) {
    for (int d = 0; d < R; ++d)
      if (!t.same_node(d, me))
        st.recv_entry[size_t(d)] = int64_t(comm.irecv(comm.area(t.local_rank, d), size_t(full), d, kStreamCombine));
  } else {
    char* stage = comm.staging(kStageCombineRecv, size_t(full) * size_t(t.num_nodes));
    for (int node = 0; node < t.num_nodes; ++node) {
      if (node == t.node) continue;
      const auto& pos = src.fwd->bundle_pos[size_t(node)];
      st.partial_count[size_t(node)] = std::count_if(pos.begin(), pos.end(), [](int32_t p) { return p >= 0; });
      st.recv_entry[size_t(node)] =
          int64_t(comm.irecv(stage + size_t(node) * size_t(full), size_t(rec.bytes(st.partial_count[size_t(node)])),
                             t.rail_peer(me, node), kStreamPartial));
    }
  }

  // 2. Contributions, into the target's slots (same node) or packed for MPI.
  if (!hybrid) {
    int64_t total = 0;
    for (int s = 0; s < R; ++s)
      if (!t.same_node(s, me)) total += rec.bytes(plan.counts[size_t(s)]);
    char* stage = comm.staging(kStageCombineSend, size_t(std::max<int64_t>(total, 16)));
    for (int s = 0; s < R; ++s) {
      const int64_t n = plan.counts[size_t(s)];
      if (s == me) {
        if (!plan.self_rows && !plan.self_lane_rows)
          fill_area(comm, plan, s, n, comm.area(t.local_rank, me), plan.num_max, false);
      } else if (t.same_node(s, me)) {
        const int l = t.local_of[size_t(s)];
        const bool in_place = !plan.in_place_offset.empty() && plan.in_place_offset[size_t(s)] >= 0;
        comm.wait_done(l, seq);
        fill_area(comm, plan, s, n, comm.area(l, me), plan.num_max, true, !in_place);
        if (in_place) {
          comm.publish_in_place(l, me, plan.in_place_offset[size_t(s)], plan.in_place_pitch, seq);
          st.in_place_readers.push_back(l);
        }
        comm.publish(l, me, n, seq);
      } else {
        fill_area(comm, plan, s, n, stage, n, false);
        comm.isend(stage, size_t(rec.bytes(n)), s, kStreamCombine);
        stage += rec.bytes(n);
      }
    }
    return;
  }
  for (int s = 0; s < R; ++s) {
    const int64_t n = plan.counts[size_t(s)];
    const int f = t.same_node(s, me) ? s : t.rail_peer(s, t.node);
    const int g = t.node_of[size_t(s)] * L + t.local_rank;
    if (f == me) {
      if (!(s == me && (plan.self_rows || plan.self_lane_rows)))
        fill_area(comm, plan, s, n, comm.area(t.local_rank, g), plan.num_max, false);
      continue;
    }
    const int lf = t.local_of[size_t(f)];
    comm.wait_done(lf, seq);
    fill_area(comm, plan, s, n, comm.area(lf, g), plan.num_max, true);
    comm.publish(lf, g, n, seq);
  }

  // 3. Hybrid forwarder: one partial per bundled token, reduced over this node's contributions.
  const cpu::EpKernels& k = kernels();
  char* send_stage = comm.staging(kStageSend, size_t(full) * size_t(t.num_nodes));
  const int K = plan.num_topk;
  const int epr = src.routing->experts_per_rank;
  for (int node = 0; node < t.num_nodes; ++node) {
    if (node == t.node) continue;
    const int64_t nb = src.fwd->fwd_count[size_t(node)];
    const int p = t.rail_peer(me, node);
    std::vector<ContribView> views(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) {
      const int g = node * L + l;
      const int d = t.node_ranks[size_t(t.node)][size_t(l)];
      if (l != t.local_rank) {
        int64_t expected = 0;
        for (int64_t b = 0; b < nb; ++b) expected += src.fwd->fwd_slot[size_t(node)][size_t(b * L + l)] >= 0;
        checked_count(comm, comm.wait_ready(g, seq, d), expected, d);
      }
      views[size_t(l)] = view_of_area(comm.area(t.local_rank, g), plan.num_max, rec);
    }
    char* out = send_stage + size_t(node) * size_t(full);
    float* out_w = rec.weight_bytes ? reinterpret_cast<float*>(out + rec.weights_off(nb)) : nullptr;
    const auto& slots = src.fwd->fwd_slot[size_t(node)];
    const auto& idx = src.fwd->fwd_idx[size_t(node)];
    parallel_range(comm.threads(), nb, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const uint16_t* rows[kMaxTopk];
        int n = 0, owner[kMaxTopk];
        for (int kk = 0; kk < K; ++kk) {
          const int64_t e = idx[size_t(b * K + kk)];
          owner[kk] = -1;
          if (e < 0) continue;
          const int r = int(e / epr);
          if (t.node_of[size_t(r)] != t.node) continue;
          const int l = t.local_of[size_t(r)];
          owner[kk] = l;
          bool later = false;
          for (int j = kk + 1; j < K && !later; ++j) {
            const int64_t ej = idx[size_t(b * K + j)];
            later = ej >= 0 && int(ej / epr) == r;
          }
          if (!later) rows[n++] = views[size_t(l)].row(slots[size_t(b * L + l)]);
        }
        k.reduce_bf16(reinterpret_cast<uint16_t*>(out + b * rec.token_bytes()), rows, n, nullptr, nullptr, plan.hidden,
                      0);
        if (out_w)
          for (int kk = 0; kk < K; ++kk)
            out_w[b * (rec.weight_bytes / 4) + kk] =
                owner[kk] < 0 ? 0.0f : views[size_t(owner[kk])].weight(slots[size_t(b * L + owner[kk])], kk);
      }
    });
    comm.isend(out, size_t(rec.bytes(nb)), p, kStreamPartial);
  }
}

void combine_receive(Comm& comm, uint64_t seq, const CombinePlan& plan, const CombineSource& src, CombineState& st,
                     const TensorView& out_x, const TensorView& out_w_view, const TensorView& bias0_view,
                     const TensorView& bias1_view) {
  uint16_t* out = out_x.ptr<uint16_t>();
  const int64_t out_stride = out_x.strides[0];
  float* out_w = out_w_view.data ? out_w_view.ptr<float>() : nullptr;
  const uint16_t* bias0 = bias0_view.data ? bias0_view.ptr<uint16_t>() : nullptr;
  const uint16_t* bias1 = bias1_view.data ? bias1_view.ptr<uint16_t>() : nullptr;
  const int64_t bias0_stride = bias0 ? bias0_view.strides[0] : 0, bias1_stride = bias1 ? bias1_view.strides[0] : 0;
  const Topology& t = comm.topo();
  const Routing& r = *src.routing;
  const int R = t.num_ranks, me = t.rank, L = t.num_local_ranks, K = r.num_topk;
  const bool hybrid = plan.mode == Mode::kHybrid;
  const CombineRecord& rec = plan.rec;
  const int64_t full = rec.bytes(plan.num_max);

  // Contribution views: per rank (direct, and hybrid ranks of this node) and per node (hybrid partials).
  std::vector<ContribView> by_rank(static_cast<size_t>(R)), by_node(static_cast<size_t>(t.num_nodes));
  for (int d = 0; d < R; ++d) {
    if (hybrid && !t.same_node(d, me)) continue;
    const int g = hybrid ? t.node * L + t.local_of[size_t(d)] : d;
    if (d == me) {
      by_rank[size_t(d)] = self_view(plan, comm.area(t.local_rank, g));
    } else if (t.same_node(d, me)) {
      checked_count(comm, comm.wait_ready(g, seq, d), r.sent_tokens(d), d);
      by_rank[size_t(d)] = view_of_area(comm.area(t.local_rank, g), plan.num_max, rec);
      int64_t pitch = 0;
      if (const char* rows = hybrid ? nullptr : comm.in_place_rows(g, seq, t.local_of[size_t(d)], &pitch)) {
        by_rank[size_t(d)].rows = rows;  // read where the contributor holds them (weights: the slots)
        by_rank[size_t(d)].token_pitch = pitch;
      }
    } else {
      const int64_t n = int64_t(comm.wait_transfer(size_t(st.recv_entry[size_t(d)]))) / rec.per_token();
      checked_count(comm, n, r.sent_tokens(d), d);
      by_rank[size_t(d)] = view_of_area(comm.area(t.local_rank, d), n, rec);
    }
  }
  if (hybrid) {
    const char* stage = comm.staging(kStageCombineRecv, size_t(full) * size_t(t.num_nodes));
    for (int node = 0; node < t.num_nodes; ++node) {
      if (node == t.node) continue;
      const int64_t n = int64_t(comm.wait_transfer(size_t(st.recv_entry[size_t(node)]))) / rec.per_token();
      checked_count(comm, n, st.partial_count[size_t(node)], t.rail_peer(me, node));
      by_node[size_t(node)] = view_of_area(stage + size_t(node) * size_t(full), n, rec);
    }
  }

  const cpu::EpKernels& k = kernels();
  // The combined output is written once and read later: stream it past the caches when it is large.
  const bool streaming = r.num_tokens * plan.hidden * 2 >= int64_t(kStreamingMinBytes);
  const bool last_lane_fast = !hybrid && plan.order == CombineOrder::kLastLane && R <= 64;
  parallel_range(comm.threads(), r.num_tokens, [&](int64_t t0, int64_t t1) {
    std::vector<const uint16_t*> row_list(size_t(std::max(R, K)));
    const uint16_t** rows = row_list.data();
    for (int64_t tok = t0; tok < t1; ++tok) {
      float weights[kMaxTopk];
      int n = 0;
      const ContribView* lane_view[kMaxTopk];
      int64_t lane_pos[kMaxTopk];
      for (int kk = 0; kk < K; ++kk) lane_view[kk] = nullptr;
      if (last_lane_fast) {
        // Direct mode, one contribution per rank in ascending order of its last lane, without
        // branches on the (random) ranks: last[d + 1] = the rank's last lane, then a compaction.
        const int32_t* lanes = r.lane_rank.data() + tok * K;
        const int32_t* slots = r.slot.data() + tok * K;
        int last[65];
        for (int kk = 0; kk < K; ++kk) last[lanes[kk] + 1] = kk;
        for (int kk = 0; kk < K; ++kk) {
          const int d = lanes[kk];
          const ContribView* v = &by_rank[size_t(d < 0 ? me : d)];
          rows[n] = v->row(slots[kk] < 0 ? 0 : slots[kk]);
          n += d >= 0 && last[d + 1] == kk;
          if (out_w) out_w[tok * K + kk] = d >= 0 ? v->weight(slots[kk], kk) : 0.0f;
        }
      } else if (plan.order == CombineOrder::kRanks) {
        for (int d = 0; d < R; ++d) {
          const auto& list = r.send_list[size_t(d)];
          const auto it = std::lower_bound(list.begin(), list.end(), int32_t(tok));
          if (it == list.end() || *it != int32_t(tok)) continue;
          const int64_t pos = it - list.begin();
          rows[n++] = by_rank[size_t(d)].row(pos);
          if (out_w) {
            for (int kk = 0; kk < K; ++kk) {
              const float add = by_rank[size_t(d)].weight(pos, kk);
              weights[kk] = (n == 1 ? 0.0f : weights[kk]) + add;
            }
          }
        }
        if (out_w)
          for (int kk = 0; kk < K; ++kk) out_w[tok * K + kk] = n ? weights[kk] : 0.0f;
      } else {
        for (int kk = 0; kk < K; ++kk) {
          const int d = r.rank_of_lane(tok, kk);
          if (d < 0) continue;
          const bool remote_node = hybrid && !t.same_node(d, me);
          const ContribView* v = remote_node ? &by_node[size_t(t.node_of[size_t(d)])] : &by_rank[size_t(d)];
          const int64_t pos = remote_node ? src.fwd->bundle_pos[size_t(t.node_of[size_t(d)])][size_t(tok)]
                                          : r.slot[size_t(tok * K + kk)];
          lane_view[kk] = v;
          lane_pos[kk] = pos;
          if (plan.order == CombineOrder::kPerLane) {
            int m = 0;
            for (int j = 0; j < kk; ++j) m += r.rank_of_lane(tok, j) == d;
            if (plan.weighted) weights[n] = (*src.lane_weights)[size_t(tok * K + kk)];
            rows[n++] = v->row(pos, m);
            continue;
          }
          bool later = false;
          for (int j = kk + 1; j < K && !later; ++j) {
            const int dj = r.rank_of_lane(tok, j);
            later = dj >= 0 &&
                    (remote_node ? !t.same_node(dj, me) && t.node_of[size_t(dj)] == t.node_of[size_t(d)] : dj == d);
          }
          if (!later) rows[n++] = v->row(pos);
        }
        if (out_w)
          for (int kk = 0; kk < K; ++kk)
            out_w[tok * K + kk] = lane_view[kk] ? lane_view[kk]->weight(lane_pos[kk], kk) : 0.0f;
      }
      uint16_t* dst = out + tok * out_stride;
      if (plan.weighted) {
        k.weighted_reduce_bf16(dst, rows, weights, n, plan.hidden);
      } else {
        k.reduce_bf16(dst, rows, n, bias0 ? bias0 + tok * bias0_stride : nullptr,
                      bias1 ? bias1 + tok * bias1_stride : nullptr, plan.hidden, streaming);
      }
    }
    if (streaming) k.store_fence();
  });
}

void combine_release(Comm& comm, uint64_t seq, const CombineState& st) {
  for (int l : st.in_place_readers) comm.wait_read(l, seq);
}

}  // namespace tessera::ep::detail
