#include "ep_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

namespace tessera::ep::test {

std::shared_ptr<Group> world_ptr() {
  static std::shared_ptr<Group> g = Group::world();
  return g;
}

Group& world_group() {
  return *world_ptr();
}

float bf16f(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

uint16_t f2bf16(float x) {
  return f32_to_bf16(x);
}

std::string where(int rank, const char* what, int64_t row, int64_t col) {
  std::ostringstream os;
  os << "rank " << rank << ": " << what << " at [" << row << ", " << col << "]";
  return os.str();
}

RankInputs make_inputs(const Config& c, int rank, int ranks) {
  RankInputs in;
  std::mt19937_64 gen(c.seed * 1000003u + uint64_t(rank) * 7919u + 17u);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  in.rank = rank;
  in.T = std::max<int64_t>(1, c.tokens - 3 * rank);
  in.hidden = c.hidden;
  in.K = c.num_topk;
  in.E = c.experts(ranks);
  in.packs = c.packs;
  in.x.resize(size_t(in.T * in.hidden));
  in.x8.resize(size_t(in.T * in.hidden));
  for (auto& v : in.x) v = f2bf16(normal(gen));
  for (auto& v : in.x8) v = uint8_t(gen());
  in.sf.resize(size_t(in.T * in.packs));
  for (auto& v : in.sf) v = uint32_t(gen());
  in.idx.assign(size_t(in.T * in.K), -1);
  in.w.resize(size_t(in.T * in.K));
  for (auto& v : in.w) v = unit(gen);
  // Unbalanced gates: a fixed per-expert bias plus noise, top-K by score, some lanes masked.
  std::vector<std::pair<float, int>> scores(size_t(in.E));
  for (int64_t t = 0; t < in.T; ++t) {
    for (int e = 0; e < in.E; ++e) scores[size_t(e)] = {1.5f * std::sin(0.7f * float(e)) + normal(gen), e};
    std::partial_sort(scores.begin(), scores.begin() + in.K, scores.end(), std::greater<>());
    const bool all_masked = t % 17 == 5;
    for (int k = 0; k < in.K; ++k)
      if (!all_masked && unit(gen) >= c.mask_prob) in.idx[size_t(t * in.K + k)] = scores[size_t(k)].second;
  }
  return in;
}

std::vector<RankInputs> all_inputs(const Config& c, int ranks) {
  std::vector<RankInputs> v;
  for (int r = 0; r < ranks; ++r) v.push_back(make_inputs(c, r, ranks));
  return v;
}

TensorView view_x(const RankInputs& in) {
  return TensorView(const_cast<uint16_t*>(in.x.data()), DType::kBF16, {in.T, int64_t(in.hidden)});
}
TensorView view_x8(const RankInputs& in) {
  return TensorView(const_cast<uint8_t*>(in.x8.data()), DType::kF8E4M3, {in.T, int64_t(in.hidden)});
}
TensorView view_sf(const RankInputs& in) {
  return TensorView(const_cast<uint32_t*>(in.sf.data()), DType::kI32, {in.T, int64_t(in.packs)});
}
TensorView view_idx(const RankInputs& in) {
  return TensorView(const_cast<int64_t*>(in.idx.data()), DType::kI64, {in.T, int64_t(in.K)});
}
TensorView view_w(const RankInputs& in) {
  return TensorView(const_cast<float*>(in.w.data()), DType::kF32, {in.T, int64_t(in.K)});
}

std::vector<RefRow> ref_rows(const std::vector<RankInputs>& in, int me, int ranks) {
  std::vector<RefRow> rows;
  for (const RankInputs& s : in)
    for (int64_t t = 0; t < s.T; ++t)
      for (int k = 0; k < s.K; ++k)
        if (s.rank_of(t, k, ranks) == me) {
          rows.push_back({s.rank, t, -1});
          break;
        }
  return rows;
}

std::vector<std::vector<RefRow>> ref_expert_rows(const std::vector<RankInputs>& in, int me, int ranks) {
  const int epr = in[0].E / ranks;
  std::vector<std::vector<RefRow>> out(static_cast<size_t>(epr));
  for (const RankInputs& s : in)
    for (int64_t t = 0; t < s.T; ++t)
      for (int k = 0; k < s.K; ++k) {
        const int64_t e = s.idx[size_t(t * s.K + k)];
        if (e >= 0 && e / epr == me) out[size_t(e - int64_t(me) * epr)].push_back({s.rank, t, k});
      }
  return out;
}

uint16_t contribution(uint16_t x, int d) {
  return f2bf16(bf16f(x) * (1.0f + 0.25f * float(d)));
}

uint16_t lane_contribution(uint16_t x, int d, int lane) {
  return f2bf16(bf16f(x) * (0.5f + 0.125f * float(lane)) + 0.0625f * float(d));
}

CombineTopo combine_topo(const ElasticBuffer& buf, bool expand, bool multiple_reduction) {
  CombineTopo c;
  c.hybrid = buf.hybrid_mode();
  c.expand = expand;
  c.multiple_reduction = multiple_reduction;
  c.node_of = buf.group().topology().node_of;
  c.my_node = buf.group().topology().node;
  return c;
}

std::vector<uint16_t> ref_combine_row(const RankInputs& mine, int64_t t, int ranks, const CombineTopo& topo,
                                      const uint16_t* bias0, const uint16_t* bias1) {
  const int K = mine.K;
  std::vector<int> rank(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) rank[size_t(k)] = mine.rank_of(t, k, ranks);
  // The contribution rank d returns for element h (expand: its lanes summed in lane order, rounded).
  auto from_rank = [&](int d, int h) -> float {
    const uint16_t x = mine.x[size_t(t * mine.hidden + h)];
    if (!topo.expand) return bf16f(contribution(x, d));
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
      if (rank[size_t(k)] == d) acc += bf16f(lane_contribution(x, d, k));
    return bf16f(f2bf16(acc));
  };
  // Keys in ascending order of their last lane; hybrid: ranks of other nodes merge into their node.
  auto key_of = [&](int d) {
    return topo.hybrid && topo.node_of[size_t(d)] != topo.my_node ? ranks + topo.node_of[size_t(d)] : d;
  };
  std::vector<int> keys;
  for (int k = 0; k < K; ++k) {
    const int d = rank[size_t(k)];
    if (d < 0) continue;
    bool later = false;
    for (int j = k + 1; j < K; ++j) later |= rank[size_t(j)] >= 0 && key_of(rank[size_t(j)]) == key_of(d);
    if (!later) keys.push_back(key_of(d));
  }
  std::vector<uint16_t> out(static_cast<size_t>(mine.hidden));
  for (int h = 0; h < mine.hidden; ++h) {
    float acc = 0.0f;
    if (bias0) acc += bf16f(bias0[h]);
    if (bias1) acc += bf16f(bias1[h]);
    if (topo.expand && !topo.multiple_reduction) {
      for (int k = 0; k < K; ++k)
        if (rank[size_t(k)] >= 0)
          acc += bf16f(lane_contribution(mine.x[size_t(t * mine.hidden + h)], rank[size_t(k)], k));
      out[size_t(h)] = f2bf16(acc);
      continue;
    }
    for (int key : keys) {
      if (key < ranks) {
        acc += from_rank(key, h);
        continue;
      }
      // A node's partial: its ranks in ascending last lane among that node's lanes, rounded once.
      const int node = key - ranks;
      float part = 0.0f;
      for (int k = 0; k < K; ++k) {
        const int d = rank[size_t(k)];
        if (d < 0 || topo.node_of[size_t(d)] != node) continue;
        bool later = false;
        for (int j = k + 1; j < K; ++j) later |= rank[size_t(j)] == d;
        if (!later) part += from_rank(d, h);
      }
      acc += bf16f(f2bf16(part));
    }
    out[size_t(h)] = f2bf16(acc);
  }
  return out;
}

}  // namespace tessera::ep::test
