// ElasticBuffer.dispatch against the reference all-to-all (DeepEP's API, docs/ep.md): received rows, scale
// packs, experts, weights and metadata per source rank, per-expert counts and aligned prefix sums,
// expanded copies, zero padding, cached == fresh, repeats, worst-case sizing without CPU sync.
#include <cstring>

#include "ep_test_util.h"
#include "test_util.h"

namespace tessera::ep::test {
namespace {

ElasticBufferConfig buffer_config(const Config& c, bool hybrid, bool fp8 = false, bool multiple_reduction = true) {
  ElasticBufferConfig cfg;
  cfg.num_max_tokens_per_rank = c.num_max;
  cfg.hidden = c.hidden;
  cfg.num_topk = c.num_topk;
  cfg.use_fp8_dispatch = fp8;
  cfg.allow_hybrid_mode = hybrid;
  cfg.allow_multiple_reduction = multiple_reduction;
  cfg.num_cpu_timeout_secs = 60;
  return cfg;
}

DispatchArgs bf16_args(const RankInputs& in) {
  DispatchArgs a;
  a.x = view_x(in);
  a.topk_idx = view_idx(in);
  a.topk_weights = view_w(in);
  a.num_experts = in.E;
  return a;
}

int local_of(int64_t e, int me, int epr) {
  return e >= 0 && e / epr == me ? int(e - int64_t(me) * epr) : -1;
}

// Rows, experts, weights and metadata of a non-expanded dispatch.
void check_non_expand(const DispatchResult& res, const std::vector<RankInputs>& in, const Config& c, int me, int R,
                      bool fp8) {
  const std::vector<RefRow> rows = ref_rows(in, me, R);
  const int K = c.num_topk, epr = in[0].E / R;
  const EpHandle& h = *res.handle;
  ASSERT_EQ(h.num_recv_tokens, int64_t(rows.size())) << "rank " << me;
  ASSERT_GE(res.recv_x.view.shape[0], int64_t(rows.size()));
  const int64_t row_bytes = int64_t(c.hidden) * (fp8 ? 1 : 2);
  for (size_t i = 0; i < rows.size(); ++i) {
    const RankInputs& s = in[size_t(rows[i].src)];
    const int64_t t = rows[i].token;
    const char* got = static_cast<const char*>(res.recv_x.view.data) + int64_t(i) * row_bytes;
    const void* want = fp8 ? static_cast<const void*>(&s.x8[size_t(t * c.hidden)]) : &s.x[size_t(t * c.hidden)];
    ASSERT_EQ(std::memcmp(got, want, size_t(row_bytes)), 0)
        << where(me, "recv_x", int64_t(i), 0) << " from rank " << rows[i].src << " token " << t;
    if (fp8) {
      const TensorView& sf = res.recv_sf.view;
      for (int p = 0; p < c.packs; ++p)
        ASSERT_EQ(sf.ptr<uint32_t>()[int64_t(i) * sf.strides[0] + p * sf.strides[1]], s.sf[size_t(t * c.packs + p)])
            << where(me, "recv_sf", int64_t(i), p);
    }
    int master = -1;
    for (int k = 0; k < K; ++k) {
      const int le = local_of(s.idx[size_t(t * K + k)], me, epr);
      if (le >= 0 && master < 0) master = k;
      ASSERT_EQ(res.recv_topk_idx.view.ptr<int64_t>()[int64_t(i) * K + k], le)
          << where(me, "recv_topk_idx", int64_t(i), k);
      ASSERT_EQ(res.recv_topk_weights.view.ptr<float>()[int64_t(i) * K + k], s.w[size_t(t * K + k)])
          << where(me, "recv_topk_weights", int64_t(i), k);
    }
    const int32_t* meta = &h.recv_src_metadata[i * size_t(K + 2)];
    ASSERT_EQ(meta[0], rows[i].src * c.num_max + t) << where(me, "recv_src_metadata", int64_t(i), 0);
    ASSERT_EQ(meta[1], rows[i].src * K + master) << where(me, "recv_src_metadata", int64_t(i), 1);
  }
  // Per source rank: inclusive prefix of rows.
  std::vector<int32_t> psum(static_cast<size_t>(R), 0);
  for (const RefRow& r : rows) ++psum[size_t(r.src)];
  for (int s = 1; s < R; ++s) psum[size_t(s)] += psum[size_t(s - 1)];
  EXPECT_EQ(h.psum_num_recv_tokens_per_scaleup_rank, psum) << "rank " << me;
  // Sender side: the slot of each lane's token at the lane's rank.
  const RankInputs& mine = in[size_t(me)];
  std::vector<int32_t> next(static_cast<size_t>(R), 0);
  for (int64_t t = 0; t < mine.T; ++t) {
    std::vector<int32_t> slot_of(static_cast<size_t>(R), -1);
    for (int k = 0; k < K; ++k) {
      const int d = mine.rank_of(t, k, R);
      if (d >= 0 && slot_of[size_t(d)] < 0) slot_of[size_t(d)] = next[size_t(d)]++;
    }
    for (int k = 0; k < K; ++k) {
      const int d = mine.rank_of(t, k, R);
      ASSERT_EQ(h.dst_buffer_slot_idx[size_t(t * K + k)], d < 0 ? -1 : slot_of[size_t(d)])
          << where(me, "dst_buffer_slot_idx", t, k);
    }
  }
}

void check_expert_counts(const EpHandle& h, const std::vector<RankInputs>& in, int me, int R, int alignment,
                         bool expand) {
  const auto experts = ref_expert_rows(in, me, R);
  int64_t start = 0, sum = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    const int32_t n = int32_t(experts[e].size()), aligned = (n + alignment - 1) / alignment * alignment;
    EXPECT_EQ(h.num_unaligned_recv_tokens_per_expert[e], n) << "rank " << me << " expert " << e;
    EXPECT_EQ(h.num_recv_tokens_per_expert_list[e], aligned) << "rank " << me << " expert " << e;
    sum += aligned;
    EXPECT_EQ(h.psum_num_recv_tokens_per_expert[e], expand ? start + n : sum) << "rank " << me << " expert " << e;
    start += aligned;
  }
  if (expand) {
    EXPECT_EQ(h.num_expanded_tokens, start);
  }
}

class ElasticDispatch : public ::testing::TestWithParam<bool> {};

TEST_P(ElasticDispatch, Bf16MatchesReference) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 11;
  const auto in = all_inputs(c, R);
  ElasticBuffer buf(world_ptr(), buffer_config(c, GetParam()));
  const Topology& topo = world_group().topology();
  EXPECT_EQ(buf.hybrid_mode(), GetParam() && topo.num_nodes > 1 && topo.uniform_nodes());
  EXPECT_EQ(buf.num_scaleout_ranks(), topo.num_nodes);
  EXPECT_EQ(buf.num_scaleup_ranks(), topo.num_local_ranks);
  DispatchArgs a = bf16_args(in[size_t(me)]);
  a.expert_alignment = 3;
  const DispatchResult res = buf.dispatch(a);
  check_non_expand(res, in, c, me, R, false);
  check_expert_counts(*res.handle, in, me, R, 3, false);
  EXPECT_EQ(res.handle->topk_idx, in[size_t(me)].idx);
}

TEST_P(ElasticDispatch, Fp8WithStridedScalesMatchesReference) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 12;
  c.packs = 3;
  const auto in = all_inputs(c, R);
  const RankInputs& mine = in[size_t(me)];
  // Scale packs given column-major (stride 1 along tokens), received in the TMA-aligned column-major layout.
  std::vector<uint32_t> sf_cols(size_t(mine.T * c.packs));
  for (int64_t t = 0; t < mine.T; ++t)
    for (int p = 0; p < c.packs; ++p) sf_cols[size_t(p * mine.T + t)] = mine.sf[size_t(t * c.packs + p)];
  ElasticBuffer buf(world_ptr(), buffer_config(c, GetParam(), true));
  DispatchArgs a = bf16_args(mine);
  a.x = view_x8(mine);
  a.sf = TensorView(sf_cols.data(), DType::kI32, {mine.T, int64_t(c.packs)}, {1, mine.T});
  a.use_tma_aligned_col_major_sf = true;
  const DispatchResult res = buf.dispatch(a);
  EXPECT_EQ(res.recv_sf.view.strides[0], 1);
  EXPECT_EQ(res.recv_sf.view.strides[1] % 4, 0);
  check_non_expand(res, in, c, me, R, true);
}

TEST_P(ElasticDispatch, ExpandedLayoutMatchesReference) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 13;
  const auto in = all_inputs(c, R);
  ElasticBuffer buf(world_ptr(), buffer_config(c, GetParam()));
  DispatchArgs a = bf16_args(in[size_t(me)]);
  a.do_expand = true;
  a.do_zero_padding = true;
  a.expert_alignment = 4;
  const DispatchResult res = buf.dispatch(a);
  const EpHandle& h = *res.handle;
  check_expert_counts(h, in, me, R, 4, true);
  EXPECT_FALSE(res.recv_topk_idx.defined());
  ASSERT_EQ(res.recv_x.view.shape[0], h.num_expanded_tokens);
  const auto experts = ref_expert_rows(in, me, R);
  const uint16_t* x = res.recv_x.view.ptr<uint16_t>();
  const float* w = res.recv_topk_weights.view.ptr<float>();
  int64_t start = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    const int64_t n = int64_t(experts[e].size()), aligned = (n + 3) / 4 * 4;
    for (int64_t i = 0; i < aligned; ++i) {
      const int64_t row = start + i;
      if (i < n) {
        const RefRow& r = experts[e][size_t(i)];
        const RankInputs& s = in[size_t(r.src)];
        ASSERT_EQ(std::memcmp(x + row * c.hidden, &s.x[size_t(r.token * c.hidden)], size_t(c.hidden) * 2), 0)
            << where(me, "expanded recv_x", row, 0) << " expert " << e;
        ASSERT_EQ(w[row], s.w[size_t(r.token * c.num_topk + r.lane)]) << where(me, "expanded weight", row, 0);
      } else {
        for (int hcol = 0; hcol < c.hidden; ++hcol)
          ASSERT_EQ(x[row * c.hidden + hcol], 0) << where(me, "padding", row, hcol);
        ASSERT_EQ(w[row], 0.0f) << where(me, "padding weight", row, 0);
      }
    }
    start += aligned;
  }
  // Metadata columns 2.. point at identical copies of the token.
  const int K = c.num_topk;
  const std::vector<RefRow> rows = ref_rows(in, me, R);
  ASSERT_EQ(h.num_recv_tokens, int64_t(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const RankInputs& s = in[size_t(rows[i].src)];
    for (int k = 0; k < K; ++k) {
      const int32_t erow = h.recv_src_metadata[i * size_t(K + 2) + 2 + size_t(k)];
      const bool local = local_of(s.idx[size_t(rows[i].token * K + k)], me, s.E / R) >= 0;
      ASSERT_EQ(erow >= 0, local) << where(me, "recv_src_metadata lane", int64_t(i), k);
      if (local) {
        ASSERT_EQ(
            std::memcmp(x + int64_t(erow) * c.hidden, &s.x[size_t(rows[i].token * c.hidden)], size_t(c.hidden) * 2), 0)
            << where(me, "expanded copy", erow, 0);
      }
    }
  }
}

TEST_P(ElasticDispatch, CachedEqualsFreshAndRepeatsAreIdentical) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 14;
  const auto in = all_inputs(c, R);
  ElasticBuffer buf(world_ptr(), buffer_config(c, GetParam()));
  for (bool expand : {false, true}) {
    DispatchArgs a = bf16_args(in[size_t(me)]);
    a.do_expand = expand;
    a.expert_alignment = 2;
    const DispatchResult first = buf.dispatch(a);
    const DispatchResult again = buf.dispatch(a);
    const size_t bytes = size_t(first.recv_x.view.shape[0] * c.hidden * 2);
    ASSERT_EQ(first.recv_x.view.shape[0], again.recv_x.view.shape[0]);
    EXPECT_EQ(std::memcmp(first.recv_x.view.data, again.recv_x.view.data, bytes), 0) << "rank " << me << " repeat";
    EXPECT_EQ(first.handle->recv_src_metadata, again.handle->recv_src_metadata);
    DispatchArgs cached;
    cached.x = view_x(in[size_t(me)]);
    cached.handle = first.handle;
    cached.do_expand = expand;
    const DispatchResult c2 = buf.dispatch(cached);
    ASSERT_EQ(c2.recv_x.view.shape[0], first.recv_x.view.shape[0]);
    EXPECT_EQ(std::memcmp(c2.recv_x.view.data, first.recv_x.view.data, bytes), 0) << "rank " << me << " cached";
    EXPECT_EQ(c2.handle, first.handle);
  }
}

// The buffer refills the previous dispatch's routing and handle vectors once nothing else holds them
// (src/ep/elastic/dispatch.cc: recycle): a handle the caller keeps must stay intact across later dispatches,
// and dispatches whose results were dropped must still be right.
TEST_P(ElasticDispatch, KeptHandlesSurviveLaterDispatches) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 21;
  const auto in1 = all_inputs(c, R);
  c.seed = 22;
  const auto in2 = all_inputs(c, R);
  ElasticBuffer buf(world_ptr(), buffer_config(c, GetParam()));
  const DispatchResult kept = buf.dispatch(bf16_args(in1[size_t(me)]));
  const EpHandle before = *kept.handle;
  for (int i = 0; i < 3; ++i) check_non_expand(buf.dispatch(bf16_args(in2[size_t(me)])), in2, c, me, R, false);
  check_non_expand(buf.dispatch(bf16_args(in1[size_t(me)])), in1, c, me, R, false);
  EXPECT_EQ(kept.handle->topk_idx, before.topk_idx);
  EXPECT_EQ(kept.handle->dst_buffer_slot_idx, before.dst_buffer_slot_idx);
  EXPECT_EQ(kept.handle->recv_src_metadata, before.recv_src_metadata);
  check_non_expand(kept, in1, c, me, R, false);
  DispatchArgs cached;
  cached.x = view_x(in1[size_t(me)]);
  cached.handle = kept.handle;
  const DispatchResult again = buf.dispatch(cached);
  ASSERT_EQ(again.recv_x.view.shape[0], kept.recv_x.view.shape[0]);
  const size_t bytes = size_t(kept.recv_x.view.shape[0] * c.hidden * 2);
  EXPECT_EQ(std::memcmp(again.recv_x.view.data, kept.recv_x.view.data, bytes), 0)
      << "rank " << me << " cached dispatch through the kept handle";
}

TEST_P(ElasticDispatch, AsyncAndWorstCaseSizing) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 15;
  const auto in = all_inputs(c, R);
  ElasticBuffer buf(world_ptr(), buffer_config(c, GetParam()));
  DispatchArgs a = bf16_args(in[size_t(me)]);
  a.async = true;
  a.do_cpu_sync = false;
  DispatchResult res = buf.dispatch(a);
  EXPECT_EQ(res.recv_x.view.shape[0], int64_t(R) * c.num_max);
  res.event.wait();
  EXPECT_TRUE(res.event.done());
  check_non_expand(res, in, c, me, R, false);
  const int64_t n = res.handle->num_recv_tokens;
  for (int64_t i = n; i < res.recv_x.view.shape[0]; ++i) {
    ASSERT_EQ(res.recv_x.view.ptr<uint16_t>()[i * c.hidden], 0) << where(me, "tail", i, 0);
    ASSERT_EQ(res.recv_topk_idx.view.ptr<int64_t>()[i * c.num_topk], -1) << where(me, "tail idx", i, 0);
  }
  // An async dispatch left pending is completed by the next call.
  a.do_cpu_sync = true;
  DispatchResult pending = buf.dispatch(a);
  const DispatchResult next = buf.dispatch(bf16_args(in[size_t(me)]));
  EXPECT_TRUE(pending.event.done());
  check_non_expand(pending, in, c, me, R, false);
  check_non_expand(next, in, c, me, R, false);
}

TEST_P(ElasticDispatch, CumulativeStatsAndThreadCounts) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 16;
  const auto in = all_inputs(c, R);
  ElasticBuffer buf(world_ptr(), buffer_config(c, GetParam()));
  const int epr = in[0].E / R;
  std::vector<int32_t> stats(size_t(epr), 5);
  DispatchArgs a = bf16_args(in[size_t(me)]);
  a.cumulative_local_expert_recv_stats = TensorView(stats.data(), DType::kI32, {int64_t(epr)});
  a.num_sms = 1;
  const DispatchResult one = buf.dispatch(a);
  a.num_sms = 3;
  const DispatchResult three = buf.dispatch(a);
  const auto experts = ref_expert_rows(in, me, R);
  for (int e = 0; e < epr; ++e)
    EXPECT_EQ(stats[size_t(e)], 5 + 2 * int32_t(experts[size_t(e)].size())) << "expert " << e;
  ASSERT_EQ(one.recv_x.view.shape[0], three.recv_x.view.shape[0]);
  EXPECT_EQ(std::memcmp(one.recv_x.view.data, three.recv_x.view.data, size_t(one.recv_x.view.shape[0] * c.hidden * 2)),
            0);
}

TEST_P(ElasticDispatch, ManyLiveOutputsStayIntact) {
  // Outputs held by the caller keep their memory: once the shared output arena is full, later
  // dispatches fall back to copying from the slots, and earlier results are never overwritten.
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 17;
  const auto in = all_inputs(c, R);
  ElasticBuffer buf = [&] {                                            // the arena size is read when the buffer is made
    tessera::test::EnvScope arena("TESSERA_EP_OUTPUT_ARENA_MB", "1");  // 16 blocks of 64 KiB: full after a few outputs
    return ElasticBuffer(world_ptr(), buffer_config(c, GetParam()));
  }();
  std::vector<DispatchResult> live;
  for (int i = 0; i < 12; ++i) {
    DispatchArgs a = bf16_args(in[size_t(me)]);
    a.do_cpu_sync = i % 2 == 0;  // worst-case sized outputs fill the arena faster
    live.push_back(buf.dispatch(a));
  }
  for (const DispatchResult& r : live) check_non_expand(r, in, c, me, R, false);
}

INSTANTIATE_TEST_SUITE_P(Modes, ElasticDispatch, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "HybridAllowed" : "Direct"; });

}  // namespace
}  // namespace tessera::ep::test
