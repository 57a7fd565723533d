// DeepSeekMoE (docs/model.md "MoE"): the f32 gate with group-limited routing, routed experts on the FP8
// grouped GEMMs (or one GEMM per expert), shared experts and the dense layers' MLP. Each (token, lane)
// output is bf16(weight * expert(x)); a token's lanes are summed in lane order in f32 and rounded once
// to bf16, exactly as ElasticBuffer's combine sums them, so one rank and R expert-parallel ranks
// (src/model/ep_exchange.cc) compute the same bits, for any thread count.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "linear.h"
#include "step.h"
#include "tessera/core/dtype.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm_grouped.h"

namespace tessera::model {
namespace {

void round_to_bf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

// MLP on rows already quantised (FP8: codes [rows, K], scales [rows, K/128]) or in f32 (bf16 weights).
// Routed experts round the outputs of their three projections to bf16, as the M-grouped GEMMs write
// them, whichever path runs them.
void mlp_rows(const Mlp& mlp, const float* x, const uint8_t* codes, const float* scales, int64_t rows, float* out,
              bool ue8m0, bool bf16_outputs = false) {
  const int64_t inter = mlp.gate.n;
  std::vector<float> g(size_t(rows * inter)), u(size_t(rows * inter));
  if (codes) {
    linear_forward_quantized(mlp.gate, codes, scales, rows, g.data());
    linear_forward_quantized(mlp.up, codes, scales, rows, u.data());
  } else {
    linear_forward(mlp.gate, x, rows, g.data(), ue8m0);
    linear_forward(mlp.up, x, rows, u.data(), ue8m0);
  }
  if (bf16_outputs) {
    round_to_bf16(g.data(), rows * inter);
    round_to_bf16(u.data(), rows * inter);
  }
  silu_mul(g.data(), u.data(), rows * inter, g.data());
  linear_forward(mlp.down, g.data(), rows, out, ue8m0);
  if (bf16_outputs) round_to_bf16(out, rows * mlp.down.n);
}

// Experts [e0, e1) of a [G, N, K] view.
gemm::ScaledTensor slice_experts(const gemm::ScaledTensor& t, int64_t e0, int64_t e1) {
  gemm::ScaledTensor s = t;
  s.data.data = static_cast<uint8_t*>(t.data.data) + e0 * t.data.strides[0];
  s.data.shape[0] = e1 - e0;
  s.scale.data = static_cast<float*>(t.scale.data) + e0 * t.scale.strides[0];
  s.scale.shape[0] = e1 - e0;
  return s;
}

// The experts of `r` on the FP8 M-grouped GEMMs over in-place [G, N, K] views: the contiguous layout
// (r's rows as they are, psum ends) for prefill, the masked layout ([G, max_m, K]) for decode. Writes
// each row's expert output, bf16, to y [r.rows, dim].
void grouped_experts(const ExpertBank& bank, const ExpertRows& r, bool masked, bool ue8m0, uint16_t* y) {
  const int64_t G = int64_t(r.begin.size()) - 1, dim = r.dim, inter = bank.gate.data.shape[1];
  const int64_t e0 = r.first_expert;
  const gemm::ScaledTensor gate = slice_experts(bank.gate, e0, e0 + G), up = slice_experts(bank.up, e0, e0 + G),
                           down = slice_experts(bank.down, e0, e0 + G);
  gemm::Recipe recipe;
  recipe.recipe = std::array<int, 3>{1, 128, 128};
  // Row i of group g sits at slot base[g] + i of the flat [slots, ...] buffers.
  std::vector<int64_t> base(static_cast<size_t>(G));
  std::vector<int32_t> counts(static_cast<size_t>(G)), ends(static_cast<size_t>(G));
  int64_t slots = 0, max_m = 0;
  for (int64_t g = 0; g < G; ++g) max_m = std::max(max_m, r.begin[size_t(g) + 1] - r.begin[size_t(g)]);
  if (max_m == 0) return;
  for (int64_t g = 0; g < G; ++g) {
    counts[size_t(g)] = int32_t(r.begin[size_t(g) + 1] - r.begin[size_t(g)]);
    base[size_t(g)] = masked ? g * max_m : slots;
    slots = masked ? (g + 1) * max_m : slots + counts[size_t(g)];
    ends[size_t(g)] = int32_t(slots);
  }
  const int64_t sk = dim / 128, si = inter / 128;
  // The contiguous layout reads r's rows in place; the masked one needs them at base[g] + i.
  std::vector<uint8_t> a_masked;
  std::vector<float> sa_masked;
  const uint8_t* a = r.codes;
  const float* sa = r.scales;
  if (masked) {
    a_masked.assign(size_t(slots * dim), 0);
    sa_masked.assign(size_t(slots * sk), 1.0f);
    for (int64_t g = 0; g < G; ++g)
      for (int64_t i = 0; i < counts[size_t(g)]; ++i) {
        const int64_t row = r.begin[size_t(g)] + i, slot = base[size_t(g)] + i;
        std::copy_n(r.codes + row * dim, dim, a_masked.data() + slot * dim);
        std::copy_n(r.scales + row * sk, sk, sa_masked.data() + slot * sk);
      }
    a = a_masked.data();
    sa = sa_masked.data();
  }
  const TensorView masked_m(counts.data(), DType::kI32, {G});
  gemm::ContiguousLayout layout;
  layout.grouped_layout = TensorView(ends.data(), DType::kI32, {G});
  layout.use_psum_layout = true;
  layout.mk_alignment = 1;
  auto run = [&](const gemm::ScaledTensor& w, const uint8_t* codes, const float* scales, int64_t k, int64_t n,
                 uint16_t* d) {
    uint8_t* c = const_cast<uint8_t*>(codes);  // the GEMMs only read their inputs
    float* s = const_cast<float*>(scales);
    if (masked) {
      gemm::m_grouped_fp8_fp4_gemm_nt_masked(
          {TensorView(c, DType::kF8E4M3, {G, max_m, k}), TensorView(s, DType::kF32, {G, max_m, k / 128})}, w,
          TensorView(d, DType::kBF16, {G, max_m, n}), masked_m, max_m, recipe);
    } else {
      gemm::m_grouped_fp8_fp4_gemm_nt_contiguous(
          {TensorView(c, DType::kF8E4M3, {slots, k}), TensorView(s, DType::kF32, {slots, k / 128})}, w,
          TensorView(d, DType::kBF16, {slots, n}), layout, recipe);
    }
  };
  std::vector<uint16_t> g(size_t(slots * inter)), u(size_t(slots * inter));
  run(gate, a, sa, dim, inter, g.data());
  run(up, a, sa, dim, inter, u.data());
  // silu(gate) * up on the rows in use, quantised again for down_proj.
  std::vector<float> h(static_cast<size_t>(inter));
  std::vector<uint8_t> a2(size_t(slots * inter));
  std::vector<float> sa2(size_t(slots * si), 1.0f);
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t i = 0; i < counts[size_t(gi)]; ++i) {
      const int64_t slot = base[size_t(gi)] + i;
      for (int64_t j = 0; j < inter; ++j) {
        const float gv = bf16_to_f32(g[size_t(slot * inter + j)]);
        h[size_t(j)] = gv / (1.0f + std::exp(-gv)) * bf16_to_f32(u[size_t(slot * inter + j)]);
      }
      q8_row(h.data(), inter, ue8m0, a2.data() + slot * inter, sa2.data() + slot * si);
    }
  std::vector<uint16_t> yd(size_t(slots * dim));
  run(down, a2.data(), sa2.data(), inter, dim, yd.data());
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t i = 0; i < counts[size_t(gi)]; ++i)
      std::copy_n(yd.data() + (base[size_t(gi)] + i) * dim, dim, y + (r.begin[size_t(gi)] + i) * dim);
}

// What every rank computes for the rows its experts received (and one rank for all rows):
// r.out[row] = bf16(weight * expert(row)), the expert output being bf16 on every path.
void run_local_experts(const LayerWeights& w, const Config& c, bool decode, ExpertRows& r, StepTimer& timer) {
  const int64_t G = int64_t(r.begin.size()) - 1, dim = r.dim, sk = dim / 128;
  const bool ue8m0 = c.ue8m0(), fp8 = c.fp8();
  for (int64_t g = 0; g < G; ++g) timer.count_routed_experts(r.begin[size_t(g) + 1] > r.begin[size_t(g)] ? 1 : 0);
  if (r.rows == 0) return;
  std::vector<uint16_t> y(size_t(r.rows * dim));
  if (fp8 && w.bank.grouped) {
    grouped_experts(w.bank, r, decode, ue8m0, y.data());
  } else {
    for (int64_t g = 0; g < G; ++g) {
      const int64_t row0 = r.begin[size_t(g)], n = r.begin[size_t(g) + 1] - row0;
      if (n == 0) continue;
      std::vector<float> yf(size_t(n * dim));
      const Mlp& expert = w.experts[size_t(r.first_expert + g)];
      if (fp8) {
        mlp_rows(expert, nullptr, r.codes + row0 * dim, r.scales + row0 * sk, n, yf.data(), ue8m0, true);
      } else {
        std::vector<float> xf(size_t(n * dim));
        for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_f32(r.bf16[size_t(row0 * dim) + i]);
        mlp_rows(expert, xf.data(), nullptr, nullptr, n, yf.data(), ue8m0, true);
      }
      for (size_t i = 0; i < yf.size(); ++i) y[size_t(row0 * dim) + i] = f32_to_bf16(yf[i]);
    }
  }
  for (int64_t i = 0; i < r.rows; ++i) {
    const float wt = r.weights[i];
    for (int64_t j = 0; j < dim; ++j) r.out[i * dim + j] = f32_to_bf16(wt * bf16_to_f32(y[size_t(i * dim + j)]));
  }
}

// One rank holding every expert: the rows grouped by expert (token order within an expert), the
// experts run as on an expert-parallel rank, and each token's lanes summed as the combine sums them.
void routed_on_one_rank(const LayerWeights& w, const Config& c, bool decode, const RoutedTokens& t, uint16_t* out,
                        StepTimer& timer) {
  const int64_t E = t.num_experts, dim = t.dim, lanes = t.rows * t.topk, sk = dim / 128;
  ExpertRows r;
  r.rows = lanes;
  r.dim = dim;
  r.begin.assign(size_t(E + 1), 0);
  for (int64_t i = 0; i < lanes; ++i) ++r.begin[size_t(t.experts[i]) + 1];
  for (int64_t e = 0; e < E; ++e) r.begin[size_t(e) + 1] += r.begin[size_t(e)];
  std::vector<int64_t> row_of_lane(static_cast<size_t>(lanes)), next(r.begin.begin(), r.begin.end() - 1);
  for (int64_t i = 0; i < lanes; ++i) row_of_lane[size_t(i)] = next[size_t(t.experts[i])]++;
  std::vector<uint8_t> codes;
  std::vector<float> scales, weights(static_cast<size_t>(lanes));
  std::vector<uint16_t> bf16;
  if (t.codes) {
    codes.resize(size_t(lanes * dim));
    scales.resize(size_t(lanes * sk));
  } else {
    bf16.resize(size_t(lanes * dim));
  }
  for (int64_t i = 0; i < lanes; ++i) {
    const int64_t tok = i / t.topk, row = row_of_lane[size_t(i)];
    weights[size_t(row)] = t.weights[i];
    if (t.codes) {
      std::copy_n(t.codes + tok * dim, dim, codes.data() + row * dim);
      std::copy_n(t.scales + tok * sk, sk, scales.data() + row * sk);
    } else {
      std::copy_n(t.bf16 + tok * dim, dim, bf16.data() + row * dim);
    }
  }
  std::vector<uint16_t> lane_out(size_t(lanes * dim));
  r.codes = codes.data();
  r.scales = scales.data();
  r.bf16 = bf16.data();
  r.weights = weights.data();
  r.out = lane_out.data();
  run_local_experts(w, c, decode, r, timer);
  // ElasticBuffer's combine without multiple reduction: acc = +0.0f, + each lane in lane order, one rounding.
  std::vector<float> acc(static_cast<size_t>(dim));
  for (int64_t tok = 0; tok < t.rows; ++tok) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k = 0; k < t.topk; ++k) {
      const uint16_t* y = lane_out.data() + row_of_lane[size_t(tok * t.topk + k)] * dim;
      for (int64_t j = 0; j < dim; ++j) acc[size_t(j)] += bf16_to_f32(y[j]);
    }
    for (int64_t j = 0; j < dim; ++j) out[tok * dim + j] = f32_to_bf16(acc[size_t(j)]);
  }
}

struct Routing {
  std::vector<int32_t> experts;  // [rows, topk]
  std::vector<float> weights;    // [rows, topk]
};

// Ranks candidates by (value descending, index ascending).
std::vector<int64_t> top_indices(const std::vector<float>& v, int64_t k) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[size_t(a)] > v[size_t(b)]; });
  order.resize(static_cast<size_t>(k));
  return order;
}

Routing route(const Config& c, const LayerWeights& w, const float* logits, int64_t rows) {
  const int64_t E = c.n_routed_experts, topk = c.n_activated_experts, G = c.n_expert_groups;
  Routing r;
  r.experts.resize(size_t(rows * topk));
  r.weights.resize(size_t(rows * topk));
  const bool has_bias = !w.gate_bias.empty();
  for (int64_t t = 0; t < rows; ++t) {
    const float* lg = logits + t * E;
    std::vector<float> scores(static_cast<size_t>(E));
    if (c.score_func == "sigmoid") {
      for (int64_t e = 0; e < E; ++e) scores[size_t(e)] = 1.0f / (1.0f + std::exp(-lg[e]));
    } else {
      float mx = -INFINITY;
      for (int64_t e = 0; e < E; ++e) mx = std::max(mx, lg[e]);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += std::exp(double(lg[e] - mx));
      for (int64_t e = 0; e < E; ++e) scores[size_t(e)] = float(std::exp(double(lg[e] - mx)) / sum);
    }
    std::vector<float> choice = scores;
    if (has_bias)
      for (int64_t e = 0; e < E; ++e) choice[size_t(e)] += w.gate_bias[size_t(e)];
    if (G > 1) {
      const int64_t per = E / G;
      std::vector<float> group_score(static_cast<size_t>(G));
      for (int64_t g = 0; g < G; ++g) {
        std::vector<float> members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
        std::sort(members.begin(), members.end(), std::greater<float>());
        group_score[size_t(g)] = has_bias ? members[0] + (per > 1 ? members[1] : 0.0f) : members[0];
      }
      const std::vector<int64_t> keep = top_indices(group_score, c.n_limited_groups);
      for (int64_t g = 0; g < G; ++g)
        if (std::find(keep.begin(), keep.end(), g) == keep.end())
          for (int64_t e = g * per; e < (g + 1) * per; ++e) choice[size_t(e)] = -INFINITY;
    }
    const std::vector<int64_t> chosen = top_indices(choice, topk);
    float sum = 0;
    for (int64_t k = 0; k < topk; ++k) sum += scores[size_t(chosen[size_t(k)])];
    for (int64_t k = 0; k < topk; ++k) {
      float wt = scores[size_t(chosen[size_t(k)])];
      if (c.score_func == "sigmoid") wt /= sum;
      r.experts[size_t(t * topk + k)] = int32_t(chosen[size_t(k)]);
      r.weights[size_t(t * topk + k)] = wt * float(c.route_scale);
    }
  }
  return r;
}

}  // namespace

void mlp_forward(const Mlp& mlp, const float* x, int64_t rows, float* out, bool ue8m0) {
  if (mlp.gate.fp8) {
    const QuantRows xq = quantize_activations(x, rows, mlp.gate.k, ue8m0);
    mlp_rows(mlp, x, xq.codes.data(), xq.scales.data(), rows, out, ue8m0);
  } else {
    mlp_rows(mlp, x, nullptr, nullptr, rows, out, ue8m0);
  }
}

void moe_forward(ModelState& m, int64_t layer, const float* x, int64_t rows, float* out, StepTimer& timer,
                 bool decode) {
  const Config& c = m.config;
  const LayerWeights& w = m.weights.layers[size_t(layer)];
  const int64_t E = c.n_routed_experts, topk = c.n_activated_experts, dim = c.dim;
  const bool ue8m0 = c.ue8m0(), fp8 = c.fp8();

  Routing routing;
  if (rows > 0) {
    std::vector<float> logits(size_t(rows * E));
    matmul_bf16_f32(x, rows, w.gate, E, dim, logits.data());
    routing = route(c, w, logits.data(), rows);
  }
  timer.lap(Component::kGate);

  // What the experts read: the q8 rows (FP8 weights) or the rows rounded to bf16 (bf16 weights, whose
  // GEMM rounds its input to bf16 anyway), on this rank or after the dispatch alike.
  QuantRows xq;
  std::vector<uint16_t> xb;
  RoutedTokens tokens;
  tokens.rows = rows;
  tokens.dim = dim;
  tokens.topk = topk;
  tokens.num_experts = E;
  tokens.experts = routing.experts.data();
  tokens.weights = routing.weights.data();
  if (fp8) {
    if (rows > 0) xq = quantize_activations(x, rows, dim, ue8m0);
    tokens.codes = xq.codes.data();
    tokens.scales = xq.scales.data();
  } else {
    xb.resize(size_t(rows * dim));
    for (size_t i = 0; i < xb.size(); ++i) xb[i] = f32_to_bf16(x[i]);
    tokens.bf16 = xb.data();
  }
  std::vector<uint16_t> routed(size_t(rows * dim));
  if (m.exchange) {
    m.exchange->exchange(
        tokens, [&](ExpertRows& r) { run_local_experts(w, c, decode, r, timer); }, routed.data());
  } else {
    routed_on_one_rank(w, c, decode, tokens, routed.data(), timer);
  }
  for (size_t i = 0; i < routed.size(); ++i) out[i] = bf16_to_f32(routed[i]);
  timer.lap(Component::kExperts);

  if (w.has_shared && rows > 0) {
    std::vector<float> z(size_t(rows * dim));
    if (fp8)
      mlp_rows(w.shared, nullptr, xq.codes.data(), xq.scales.data(), rows, z.data(), ue8m0);
    else
      mlp_rows(w.shared, x, nullptr, nullptr, rows, z.data(), ue8m0);
    for (size_t i = 0; i < z.size(); ++i) out[i] += z[i];
  }
  timer.lap(Component::kShared);
}

}  // namespace tessera::model
