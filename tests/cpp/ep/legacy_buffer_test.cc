// Legacy Buffer (v1): the dispatch layout, normal dispatch/combine (rank-ordered, non-local weights 0,
// bit-exact combine, cached dispatch, num_worst_tokens) and low-latency dispatch/combine (per-expert
// counts, FP8 cast with and without power-of-two / UE8M0 scales, weighted combine, hooks).
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ep_test_util.h"

namespace tessera::ep::test {
namespace {

BufferConfig legacy_config(bool low_latency) {
  BufferConfig cfg;
  cfg.num_nvl_bytes = 4 << 20;
  cfg.low_latency_mode = low_latency;
  cfg.num_cpu_timeout_secs = 60;
  return cfg;
}

TEST(LegacyBuffer, LayoutDispatchCombineAndCache) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 41;
  const auto in = all_inputs(c, R);
  const RankInputs& mine = in[size_t(me)];
  const int K = c.num_topk, E = mine.E, epr = E / R;
  Buffer buf(world_ptr(), legacy_config(false));
  const DispatchLayout layout = buf.get_dispatch_layout(view_idx(mine), E);
  std::vector<int32_t> per_rank(size_t(R), 0), per_expert(size_t(E), 0);
  for (int64_t t = 0; t < mine.T; ++t) {
    std::vector<bool> hit(size_t(R), false);
    for (int k = 0; k < K; ++k) {
      const int64_t e = mine.idx[size_t(t * K + k)];
      if (e < 0) continue;
      ++per_expert[size_t(e)];
      hit[size_t(e / epr)] = true;
    }
    for (int d = 0; d < R; ++d) {
      per_rank[size_t(d)] += hit[size_t(d)];
      ASSERT_EQ(layout.is_token_in_rank.view.ptr<uint8_t>()[t * R + d], hit[size_t(d)] ? 1 : 0)
          << where(me, "is_token_in_rank", t, d);
    }
  }
  for (int d = 0; d < R; ++d) EXPECT_EQ(layout.num_tokens_per_rank.view.ptr<int32_t>()[d], per_rank[size_t(d)]);
  for (int e = 0; e < E; ++e) EXPECT_EQ(layout.num_tokens_per_expert.view.ptr<int32_t>()[e], per_expert[size_t(e)]);
  EXPECT_EQ(layout.num_tokens_per_rdma_rank.defined(), world_group().topology().num_nodes > 1);

  LegacyDispatchArgs a;
  a.x = view_x(mine);
  a.num_tokens_per_rank = layout.num_tokens_per_rank.view;
  a.is_token_in_rank = layout.is_token_in_rank.view;
  a.num_tokens_per_expert = layout.num_tokens_per_expert.view;
  a.topk_idx = view_idx(mine);
  a.topk_weights = view_w(mine);
  a.expert_alignment = 2;
  {  // per-expert counts that topk_idx does not give: refused on every rank before any exchange
    std::vector<int32_t> wrong(per_expert);
    wrong[size_t(E - 1)] += 1;
    LegacyDispatchArgs bad = a;
    bad.num_tokens_per_expert = TensorView(wrong.data(), DType::kI32, {int64_t(E)});
    try {
      buf.dispatch(bad);
      ADD_FAILURE() << "a wrong num_tokens_per_expert was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("num_tokens_per_expert["), std::string::npos) << e.what();
    }
  }
  const LegacyDispatchResult d = buf.dispatch(a);
  const std::vector<RefRow> rows = ref_rows(in, me, R);
  ASSERT_EQ(d.recv_x.view.shape[0], int64_t(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const RankInputs& s = in[size_t(rows[i].src)];
    const int64_t t = rows[i].token;
    ASSERT_EQ(
        std::memcmp(d.recv_x.view.ptr<uint16_t>() + i * c.hidden, &s.x[size_t(t * c.hidden)], size_t(c.hidden) * 2), 0)
        << where(me, "recv_x", int64_t(i), 0);
    for (int k = 0; k < K; ++k) {
      const int64_t e = s.idx[size_t(t * K + k)];
      const bool local = e >= 0 && e / epr == me;
      ASSERT_EQ(d.recv_topk_idx.view.ptr<int64_t>()[i * K + k], local ? e - int64_t(me) * epr : -1);
      ASSERT_EQ(d.recv_topk_weights.view.ptr<float>()[i * K + k], local ? s.w[size_t(t * K + k)] : 0.0f)
          << where(me, "recv_topk_weights", int64_t(i), k);
    }
  }
  const auto experts = ref_expert_rows(in, me, R);
  ASSERT_EQ(d.num_recv_tokens_per_expert_list.size(), size_t(epr));
  for (int e = 0; e < epr; ++e)
    EXPECT_EQ(d.num_recv_tokens_per_expert_list[size_t(e)], (int(experts[size_t(e)].size()) + 1) / 2 * 2);

  // Cached dispatch returns the same rows.
  LegacyDispatchArgs cached;
  cached.x = view_x(mine);
  cached.handle = d.handle;
  const LegacyDispatchResult again = buf.dispatch(cached);
  ASSERT_EQ(again.recv_x.view.shape[0], d.recv_x.view.shape[0]);
  EXPECT_EQ(std::memcmp(again.recv_x.view.data, d.recv_x.view.data, size_t(rows.size() * c.hidden * 2)), 0);
  EXPECT_FALSE(again.recv_topk_idx.defined());

  // Combine: bias first, then source ranks ascending; weights summed the same way.
  std::vector<uint16_t> y(size_t(rows.size() * c.hidden));
  for (size_t i = 0; i < y.size(); ++i) y[i] = contribution(d.recv_x.view.ptr<uint16_t>()[i], me);
  std::vector<uint16_t> bias(size_t(mine.T * c.hidden));
  std::mt19937 gen(uint32_t(77 + me));
  std::normal_distribution<float> normal;
  for (auto& v : bias) v = f2bf16(normal(gen));
  LegacyCombineArgs ca;
  ca.x = TensorView(y.data(), DType::kBF16, {int64_t(rows.size()), int64_t(c.hidden)});
  ca.topk_weights = d.recv_topk_weights.view;
  ca.bias0 = TensorView(bias.data(), DType::kBF16, {mine.T, int64_t(c.hidden)});
  const LegacyCombineResult out = buf.combine(ca, *d.handle);
  for (int64_t t = 0; t < mine.T; ++t) {
    std::vector<bool> hit(size_t(R), false);
    for (int k = 0; k < K; ++k)
      if (mine.rank_of(t, k, R) >= 0) hit[size_t(mine.rank_of(t, k, R))] = true;
    for (int hh = 0; hh < c.hidden; ++hh) {
      float acc = 0.0f;
      acc += bf16f(bias[size_t(t * c.hidden + hh)]);
      for (int r = 0; r < R; ++r)
        if (hit[size_t(r)]) acc += bf16f(contribution(mine.x[size_t(t * c.hidden + hh)], r));
      ASSERT_EQ(out.combined_x.view.ptr<uint16_t>()[t * c.hidden + hh], f2bf16(acc)) << where(me, "combined_x", t, hh);
    }
    for (int k = 0; k < K; ++k)
      ASSERT_EQ(out.combined_topk_weights.view.ptr<float>()[t * K + k],
                mine.idx[size_t(t * K + k)] >= 0 ? mine.w[size_t(t * K + k)] : 0.0f)
          << where(me, "combined_topk_weights", t, k);
  }

  // num_worst_tokens: fixed-size outputs, valid rows first, the rest zero / -1, no per-expert list.
  a.num_worst_tokens = int64_t(R) * c.tokens;
  a.async = true;
  LegacyDispatchResult worst = buf.dispatch(a);
  worst.event.wait();
  EXPECT_TRUE(worst.num_recv_tokens_per_expert_list.empty());
  ASSERT_EQ(worst.recv_x.view.shape[0], a.num_worst_tokens);
  EXPECT_EQ(std::memcmp(worst.recv_x.view.data, d.recv_x.view.data, size_t(rows.size() * c.hidden * 2)), 0);
  for (int64_t i = int64_t(rows.size()); i < a.num_worst_tokens; ++i)
    ASSERT_EQ(worst.recv_topk_idx.view.ptr<int64_t>()[i * K], -1) << where(me, "worst-case tail", i, 0);

  // The same combine with the contributions written over recv_x, which lives in the buffer's shared
  // output arena on one node (direct receive). Same bits.
  std::memcpy(d.recv_x.view.data, y.data(), y.size() * 2);
  ca.x = d.recv_x.view;
  const LegacyCombineResult in_place = buf.combine(ca, *d.handle);
  EXPECT_EQ(std::memcmp(in_place.combined_x.view.data, out.combined_x.view.data, size_t(mine.T * c.hidden * 2)), 0)
      << "rank " << me << ": combine with x = recv_x differs from combine with a private copy";
  EXPECT_EQ(std::memcmp(in_place.combined_topk_weights.view.data, out.combined_topk_weights.view.data,
                        size_t(mine.T * K * 4)),
            0);
}

// Without topk_idx the records carry no experts: the rows still arrive (they came back as zeros once),
// the per-expert counts come from every rank's num_tokens_per_expert (as DeepEP's), and the handle holds
// DeepEP's rank prefix matrix.
TEST(LegacyBuffer, DispatchWithoutTopkCarriesRowsCountsAndPrefix) {
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 43;
  const auto in = all_inputs(c, R);
  const RankInputs& mine = in[size_t(me)];
  const int E = mine.E, epr = E / R;
  Buffer buf(world_ptr(), legacy_config(false));
  const DispatchLayout layout = buf.get_dispatch_layout(view_idx(mine), E);
  LegacyDispatchArgs a;
  a.x = view_x(mine);
  a.num_tokens_per_rank = layout.num_tokens_per_rank.view;
  a.is_token_in_rank = layout.is_token_in_rank.view;
  a.num_tokens_per_expert = layout.num_tokens_per_expert.view;
  a.expert_alignment = 4;
  const LegacyDispatchResult d = buf.dispatch(a);
  const std::vector<RefRow> rows = ref_rows(in, me, R);
  ASSERT_EQ(d.recv_x.view.shape[0], int64_t(rows.size()));
  EXPECT_FALSE(d.recv_topk_idx.defined());
  for (size_t i = 0; i < rows.size(); ++i)
    ASSERT_EQ(std::memcmp(d.recv_x.view.ptr<uint16_t>() + i * c.hidden,
                          &in[size_t(rows[i].src)].x[size_t(rows[i].token * c.hidden)], size_t(c.hidden) * 2),
              0)
        << where(me, "recv_x without topk", int64_t(i), 0);
  // Expected figures from every rank's inputs.
  std::vector<int64_t> per_expert(size_t(E), 0);
  std::vector<int32_t> sent(size_t(R * R), 0);
  for (int s = 0; s < R; ++s) {
    const RankInputs& src = in[size_t(s)];
    for (int64_t t = 0; t < src.T; ++t) {
      std::vector<bool> hit(size_t(R), false);
      for (int k = 0; k < c.num_topk; ++k) {
        const int64_t e = src.idx[size_t(t * c.num_topk + k)];
        if (e < 0) continue;
        ++per_expert[size_t(e)];
        hit[size_t(e / epr)] = true;
      }
      for (int j = 0; j < R; ++j) sent[size_t(s * R + j)] += hit[size_t(j)];
    }
  }
  ASSERT_EQ(d.num_recv_tokens_per_expert_list.size(), size_t(epr));
  for (int e = 0; e < epr; ++e)
    EXPECT_EQ(d.num_recv_tokens_per_expert_list[size_t(e)], int((per_expert[size_t(me * epr + e)] + 3) / 4 * 4));
  ASSERT_EQ(d.handle->rank_prefix_matrix.size(), size_t(R * R));
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < R; ++j) {
      int32_t want = 0;
      for (int s = 0; s <= i; ++s) want += sent[size_t(s * R + j)];
      EXPECT_EQ(d.handle->rank_prefix_matrix[size_t(i * R + j)], want) << "rank prefix [" << i << "][" << j << "]";
    }
  // Combine sums each token's copies: x times the number of ranks it went to (exact for 1..R copies of
  // one bf16 value only when R <= 2, so compare against the fp32 sum rounded once).
  LegacyCombineArgs ca;
  ca.x = d.recv_x.view;
  const LegacyCombineResult out = buf.combine(ca, *d.handle);
  for (int64_t t = 0; t < mine.T; ++t) {
    int copies = 0;
    for (int j = 0; j < R; ++j) copies += layout.is_token_in_rank.view.ptr<uint8_t>()[t * R + j] ? 1 : 0;
    for (int hh = 0; hh < c.hidden; ++hh) {
      float acc = 0.0f;
      for (int n = 0; n < copies; ++n) acc += bf16f(mine.x[size_t(t * c.hidden + hh)]);
      ASSERT_EQ(out.combined_x.view.ptr<uint16_t>()[t * c.hidden + hh], f2bf16(acc)) << where(me, "combined_x", t, hh);
    }
  }
}

// The FP8 cast as docs/ep.md defines it, written here from tessera's scalar dtype conversions.
void ref_cast(const uint16_t* x, int64_t H, bool round_scale, std::vector<uint8_t>& q, std::vector<float>& scale,
              std::vector<uint8_t>& exponent) {
  for (int64_t b = 0; b < H / 128; ++b) {
    float amax = 0.0f;
    for (int64_t i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(bf16f(x[b * 128 + i])));
    amax = std::max(amax, 1e-4f);
    float inverse;
    if (round_scale) {
      const uint8_t e = f32_to_ue8m0_ceil(amax / 448.0f);
      exponent.push_back(e);
      scale.push_back(ue8m0_to_f32(e));
      inverse = 1.0f / ue8m0_to_f32(e);
    } else {
      scale.push_back(amax / 448.0f);
      inverse = 448.0f / amax;
    }
    for (int64_t i = 0; i < 128; ++i) q.push_back(f32_to_e4m3_sat(bf16f(x[b * 128 + i]) * inverse));
  }
}

struct LowLatencyCase {
  bool fp8, round_scale, ue8m0;
};

// Every rank's received rows of a low-latency dispatch of `in` (per-expert counts, source tokens, rows
// bit-equal to the source or to its reference FP8 cast and scales).
void check_low_latency_recv(const LowLatencyDispatchResult& d, const std::vector<RankInputs>& in, const Config& c,
                            int num_max, const LowLatencyCase& lc) {
  const int R = world_group().size(), me = world_group().rank();
  const int epr = in[size_t(me)].E / R;
  const auto experts = ref_expert_rows(in, me, R);
  const int64_t rows = int64_t(R) * num_max, packs = lc.ue8m0 ? c.hidden / 512 : c.hidden / 128;
  for (int e = 0; e < epr; ++e) {
    ASSERT_EQ(d.recv_count.view.ptr<int32_t>()[e], int32_t(experts[size_t(e)].size()))
        << "rank " << me << " expert " << e;
    for (size_t i = 0; i < experts[size_t(e)].size(); ++i) {
      const RefRow& r = experts[size_t(e)][i];
      const uint16_t* src = &in[size_t(r.src)].x[size_t(r.token * c.hidden)];
      const int64_t row = int64_t(e) * rows + int64_t(i);
      ASSERT_EQ(d.handle->src_info.view.ptr<int32_t>()[row], r.token);
      if (!lc.fp8) {
        ASSERT_EQ(std::memcmp(d.recv_x.view.ptr<uint16_t>() + row * c.hidden, src, size_t(c.hidden) * 2), 0)
            << where(me, "low-latency recv_x", row, 0);
        continue;
      }
      std::vector<uint8_t> q, ex;
      std::vector<float> sc;
      ref_cast(src, c.hidden, lc.round_scale, q, sc, ex);
      ASSERT_EQ(std::memcmp(d.recv_x.view.ptr<uint8_t>() + row * c.hidden, q.data(), q.size()), 0)
          << where(me, "fp8 recv_x", row, 0);
      const TensorView& s = d.recv_scales.view;
      for (int64_t p = 0; p < packs; ++p) {
        const int64_t off = e * s.strides[0] + int64_t(i) * s.strides[1] + p * s.strides[2];
        if (lc.ue8m0) {
          uint32_t want = 0;
          for (int j = 0; j < 4; ++j) want |= uint32_t(ex[size_t(p * 4 + j)]) << (8 * j);
          ASSERT_EQ(uint32_t(s.ptr<int32_t>()[off]), want) << where(me, "ue8m0 scales", row, p);
        } else {
          ASSERT_EQ(s.ptr<float>()[off], sc[size_t(p)]) << where(me, "scales", row, p);
        }
      }
    }
  }
}

class LowLatency : public ::testing::TestWithParam<LowLatencyCase> {};

TEST_P(LowLatency, DispatchCountsCastAndWeightedCombine) {
  const LowLatencyCase lc = GetParam();
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 51;
  c.tokens = 29;
  c.hidden = 512;
  c.num_topk = 5;
  const auto in = all_inputs(c, R);
  const RankInputs& mine = in[size_t(me)];
  const int K = c.num_topk, E = mine.E, epr = E / R;
  const int num_max = 32;
  BufferConfig cfg = legacy_config(true);
  cfg.num_nvl_bytes = 0;
  cfg.num_rdma_bytes = Buffer::get_low_latency_rdma_size_hint(num_max, c.hidden, R, E);
  Buffer buf(world_ptr(), cfg);
  std::vector<int32_t> stats(size_t(epr), 0);
  LowLatencyDispatchArgs a;
  a.x = view_x(mine);
  a.topk_idx = view_idx(mine);
  a.num_max_dispatch_tokens_per_rank = num_max;
  a.num_experts = E;
  a.cumulative_local_expert_recv_stats = TensorView(stats.data(), DType::kI32, {int64_t(epr)});
  a.use_fp8 = lc.fp8;
  a.round_scale = lc.round_scale;
  a.use_ue8m0 = lc.ue8m0;
  a.return_recv_hook = true;
  LowLatencyDispatchResult d = buf.low_latency_dispatch(a);
  d.event.wait();  // the hook
  ASSERT_NO_FATAL_FAILURE(check_low_latency_recv(d, in, c, num_max, lc));
  const auto experts = ref_expert_rows(in, me, R);
  const int64_t rows = int64_t(R) * num_max;
  for (int e = 0; e < epr; ++e) EXPECT_EQ(stats[size_t(e)], int32_t(experts[size_t(e)].size()));
  // Combine: y = a bf16 function of the received bf16 row and its lane; the source sums w * y.
  if (lc.fp8) return;
  std::vector<uint16_t> y(size_t(epr * rows * c.hidden), 0x7FC0);
  for (int e = 0; e < epr; ++e)
    for (size_t i = 0; i < experts[size_t(e)].size(); ++i) {
      const int64_t row = int64_t(e) * rows + int64_t(i);
      for (int hh = 0; hh < c.hidden; ++hh)
        y[size_t(row * c.hidden + hh)] =
            lane_contribution(d.recv_x.view.ptr<uint16_t>()[row * c.hidden + hh], me, experts[size_t(e)][i].lane);
    }
  std::vector<uint16_t> out(size_t(mine.T * c.hidden), 0);
  LowLatencyCombineArgs ca;
  ca.x = TensorView(y.data(), DType::kBF16, {int64_t(epr), rows, int64_t(c.hidden)});
  ca.topk_idx = view_idx(mine);
  ca.topk_weights = view_w(mine);
  ca.out = TensorView(out.data(), DType::kBF16, {mine.T, int64_t(c.hidden)});
  ca.async = true;
  LowLatencyCombineResult comb = buf.low_latency_combine(ca, *d.handle);
  comb.event.wait();
  EXPECT_EQ(comb.combined_x.view.data, out.data());
  for (int64_t t = 0; t < mine.T; ++t)
    for (int hh = 0; hh < c.hidden; ++hh) {
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) {
        const int dst = mine.rank_of(t, k, R);
        if (dst < 0) continue;
        const float product =
            mine.w[size_t(t * K + k)] * bf16f(lane_contribution(mine.x[size_t(t * c.hidden + hh)], dst, k));
        acc += product;
      }
      ASSERT_EQ(out[size_t(t * c.hidden + hh)], f2bf16(acc)) << where(me, "low-latency combined", t, hh);
    }
}

// Two FP8 dispatches on one buffer, the second issued before the first's hook ran and with fewer tokens
// of other values: the buffer reuses its cast and staging memory between calls, so the second call
// must first complete the first (both results stay valid: outputs alternate between two blocks).
TEST(LowLatencyReuse, BackToBackDispatchesBeforeTheHook) {
  const int R = world_group().size(), me = world_group().rank();
  Config big, small;
  big.seed = 61;
  big.tokens = 31;
  small.seed = 62;
  small.tokens = 13;
  big.hidden = small.hidden = 512;
  big.num_topk = small.num_topk = 5;
  const auto in_big = all_inputs(big, R), in_small = all_inputs(small, R);
  const int num_max = 32, E = in_big[size_t(me)].E;
  BufferConfig cfg = legacy_config(true);
  cfg.num_nvl_bytes = 0;
  cfg.num_rdma_bytes = Buffer::get_low_latency_rdma_size_hint(num_max, big.hidden, R, E);
  Buffer buf(world_ptr(), cfg);
  auto args = [&](const RankInputs& mine) {
    LowLatencyDispatchArgs a;
    a.x = view_x(mine);
    a.topk_idx = view_idx(mine);
    a.num_max_dispatch_tokens_per_rank = num_max;
    a.num_experts = E;
    a.use_fp8 = true;
    a.return_recv_hook = true;
    return a;
  };
  const LowLatencyCase lc{true, false, false};
  LowLatencyDispatchResult first = buf.low_latency_dispatch(args(in_big[size_t(me)]));
  LowLatencyDispatchResult second = buf.low_latency_dispatch(args(in_small[size_t(me)]));
  second.event.wait();
  first.event.wait();  // already completed by the second call
  ASSERT_NO_FATAL_FAILURE(check_low_latency_recv(first, in_big, big, num_max, lc));
  ASSERT_NO_FATAL_FAILURE(check_low_latency_recv(second, in_small, small, num_max, lc));
}

INSTANTIATE_TEST_SUITE_P(Casts, LowLatency,
                         ::testing::Values(LowLatencyCase{false, false, false}, LowLatencyCase{true, false, false},
                                           LowLatencyCase{true, true, false}, LowLatencyCase{true, true, true}),
                         [](const ::testing::TestParamInfo<LowLatencyCase>& p) {
                           return std::string(p.param.fp8 ? "Fp8" : "Bf16") + (p.param.round_scale ? "Pow2" : "") +
                                  (p.param.ue8m0 ? "Ue8m0" : "");
                         });

}  // namespace
}  // namespace tessera::ep::test
