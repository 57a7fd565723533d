// ElasticBuffer.combine bit-for-bit against the reference reduction order (DeepEP's API, docs/ep.md: bias,
// then one contribution per destination in ascending order of its last top-k lane; hybrid: node
// partials reduced at the forwarder; expand: local copies summed first unless multiple reduction is
// off), combined top-k weights, and the dispatch -> combine round trip of the weights.
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "ep_test_util.h"

namespace tessera::ep::test {
namespace {

struct Case {
  bool hybrid;
  bool expand;
  bool multiple_reduction;
  int hidden = 256;  // 2056: rows of 4112 bytes, large enough for the streaming-store paths, unaligned
  // x from get_combine_input (the buffer's shared arena on one node: read in place by the sources),
  // poisoned as soon as combine returns (a source still reading it would see NaN).
  bool x_in_arena = false;
};

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  return std::string(p.param.hybrid ? "HybridAllowed" : "Direct") + (p.param.expand ? "Expand" : "Plain") +
         (p.param.multiple_reduction ? "" : "SingleReduction") + "Hidden" + std::to_string(p.param.hidden) +
         (p.param.x_in_arena ? "XInArena" : "");
}

class ElasticCombine : public ::testing::TestWithParam<Case> {};

TEST_P(ElasticCombine, BitExactToReferenceOrder) {
  const Case cs = GetParam();
  const int R = world_group().size(), me = world_group().rank();
  Config c;
  c.seed = 21 + cs.expand;
  c.hidden = cs.hidden;
  c.tokens = cs.hidden > 256 ? 130 : 97;
  c.num_max = 160;
  const auto in = all_inputs(c, R);
  const RankInputs& mine = in[size_t(me)];
  ElasticBufferConfig cfg;
  cfg.num_max_tokens_per_rank = c.num_max;
  cfg.hidden = c.hidden;
  cfg.num_topk = c.num_topk;
  cfg.allow_hybrid_mode = cs.hybrid;
  cfg.allow_multiple_reduction = cs.multiple_reduction;
  cfg.num_cpu_timeout_secs = 60;
  ElasticBuffer buf(world_ptr(), cfg);

  DispatchArgs a;
  a.x = view_x(mine);
  a.topk_idx = view_idx(mine);
  a.topk_weights = view_w(mine);
  a.num_experts = mine.E;
  a.do_expand = cs.expand;
  a.expert_alignment = cs.expand ? 4 : 1;
  const DispatchResult d = buf.dispatch(a);
  const EpHandle& h = *d.handle;
  const int K = c.num_topk;

  // The "experts": each row becomes a bf16 function of itself and of this rank (and the lane).
  const int64_t rows = d.recv_x.view.shape[0];
  std::vector<uint16_t> y(size_t(rows * c.hidden), 0x7FC0);  // padding rows stay NaN: never read
  const uint16_t* rx = d.recv_x.view.ptr<uint16_t>();
  if (!cs.expand) {
    for (int64_t i = 0; i < rows; ++i)
      for (int hh = 0; hh < c.hidden; ++hh) y[size_t(i * c.hidden + hh)] = contribution(rx[i * c.hidden + hh], me);
  } else {
    for (int64_t i = 0; i < h.num_recv_tokens; ++i)
      for (int k = 0; k < K; ++k) {
        const int32_t erow = h.recv_src_metadata[size_t(i * (K + 2) + 2 + k)];
        if (erow < 0) continue;
        for (int hh = 0; hh < c.hidden; ++hh)
          y[size_t(erow * c.hidden + hh)] = lane_contribution(rx[erow * c.hidden + hh], me, k);
      }
  }
  std::mt19937 gen(uint32_t(1234 + me));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> bias0(size_t(mine.T * c.hidden)), bias1(bias0.size());
  for (auto& v : bias0) v = f2bf16(normal(gen));
  for (auto& v : bias1) v = f2bf16(normal(gen));

  CombineArgs ca;
  ca.x = TensorView(y.data(), DType::kBF16, {rows, int64_t(c.hidden)});
  OwnedTensor x_arena;
  if (cs.x_in_arena) {
    x_arena = buf.get_combine_input(h);
    ASSERT_EQ(x_arena.view.shape[0], cs.expand ? h.num_expanded_tokens : h.num_recv_tokens);
    ASSERT_EQ(x_arena.view.shape[1], c.hidden);
    std::memcpy(x_arena.view.data, y.data(), size_t(x_arena.view.shape[0] * c.hidden) * 2);
    ca.x = x_arena.view;
  }
  ca.topk_weights = d.recv_topk_weights.view;  // round trip: each lane's owner returns the sender's weight
  ca.bias0 = TensorView(bias0.data(), DType::kBF16, {mine.T, int64_t(c.hidden)});
  ca.bias1 = TensorView(bias1.data(), DType::kBF16, {mine.T, int64_t(c.hidden)});
  // x in the arena: odd ranks read late (async, then a pause), so an even rank that returned before
  // they finished reading its rows would poison what they read.
  ca.async = cs.x_in_arena && me % 2 == 1;
  CombineResult out = buf.combine(ca, h);
  if (ca.async) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    out.event.wait();
  }
  if (cs.x_in_arena) std::fill_n(x_arena.view.ptr<uint16_t>(), x_arena.view.shape[0] * c.hidden, uint16_t(0x7FC0));
  world_group().barrier();
  ASSERT_EQ(out.combined_x.view.shape[0], mine.T);
  const CombineTopo topo = combine_topo(buf, cs.expand, cs.multiple_reduction);
  for (int64_t t = 0; t < mine.T; ++t) {
    const auto want = ref_combine_row(mine, t, R, topo, &bias0[size_t(t * c.hidden)], &bias1[size_t(t * c.hidden)]);
    const uint16_t* got = out.combined_x.view.ptr<uint16_t>() + t * c.hidden;
    for (int hh = 0; hh < c.hidden; ++hh)
      ASSERT_EQ(got[hh], want[size_t(hh)])
          << where(me, "combined_x", t, hh) << " got " << bf16f(got[hh]) << " want " << bf16f(want[size_t(hh)]);
    for (int k = 0; k < K; ++k) {
      const float expect = mine.idx[size_t(t * K + k)] >= 0 ? mine.w[size_t(t * K + k)] : 0.0f;
      ASSERT_EQ(out.combined_topk_weights.view.ptr<float>()[t * K + k], expect)
          << where(me, "combined_topk_weights", t, k);
    }
  }
  // Without bias and weights; and asynchronously.
  if (cs.x_in_arena) std::memcpy(x_arena.view.data, y.data(), size_t(x_arena.view.shape[0] * c.hidden) * 2);
  CombineArgs plain;
  plain.x = ca.x;
  plain.async = true;
  CombineResult later = buf.combine(plain, h);
  later.event.wait();
  EXPECT_FALSE(later.combined_topk_weights.defined());
  for (int64_t t = 0; t < mine.T; ++t) {
    const auto want = ref_combine_row(mine, t, R, topo, nullptr, nullptr);
    ASSERT_EQ(std::memcmp(later.combined_x.view.ptr<uint16_t>() + t * c.hidden, want.data(), size_t(c.hidden) * 2), 0)
        << where(me, "combined_x without bias", t, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ElasticCombine,
                         ::testing::Values(Case{true, false, true}, Case{false, false, true}, Case{true, true, true},
                                           Case{false, true, true}, Case{true, true, false},
                                           Case{true, false, true, 2056}, Case{false, true, true, 2056},
                                           Case{false, false, true, 2056, true}, Case{true, false, true, 256, true},
                                           Case{false, true, true, 256, true}),
                         case_name);

}  // namespace
}  // namespace tessera::ep::test
