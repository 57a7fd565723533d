// DeepSeekMoE (docs/model.md "MoE"): the f32 gate with group-limited routing, routed experts on the FP8
// GEMM (one call per expert over the rows routed to it, quantised once), shared experts and the dense
// layers' MLP. Routed outputs are summed per token in the order of its chosen experts, so the result
// does not depend on how rows are split over threads.
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

// MLP on rows already quantised (FP8) or in f32 (bf16 weights). Routed experts round the outputs of
// their three projections to bf16, as the M-grouped GEMMs write them, whichever path runs them.
void mlp_rows(const Mlp& mlp, const float* x, const QuantRows* xq, int64_t rows, float* out, bool ue8m0,
              bool bf16_outputs = false) {
  const int64_t inter = mlp.gate.n;
  std::vector<float> g(size_t(rows * inter)), u(size_t(rows * inter));
  if (xq) {
    linear_forward_quantized(mlp.gate, xq->codes.data(), xq->scales.data(), rows, g.data());
    linear_forward_quantized(mlp.up, xq->codes.data(), xq->scales.data(), rows, u.data());
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

// The experts [e0, e1) on the FP8 M-grouped GEMMs over in-place [G, N, K] views: the contiguous layout
// (rows sorted by expert, psum ends) for prefill, the masked layout ([G, max_m, K]) for decode. Writes
// each (token, choice) row of expert_out.
void grouped_experts(const ExpertBank& bank, int64_t e0, int64_t e1, const std::vector<std::vector<int64_t>>& assigned,
                     const QuantRows& xq, int64_t topk, bool masked, bool ue8m0, float* expert_out) {
  const int64_t G = e1 - e0, dim = xq.k, inter = bank.gate.data.shape[1];
  const gemm::ScaledTensor gate = slice_experts(bank.gate, e0, e1), up = slice_experts(bank.up, e0, e1),
                           down = slice_experts(bank.down, e0, e1);
  gemm::Recipe recipe;
  recipe.recipe = std::array<int, 3>{1, 128, 128};
  // Row r of group g sits at slot base[g] + r of the flat [slots, ...] buffers.
  std::vector<int64_t> base(static_cast<size_t>(G));
  std::vector<int32_t> counts(static_cast<size_t>(G)), ends(static_cast<size_t>(G));
  int64_t slots = 0, max_m = 0;
  for (int64_t g = 0; g < G; ++g) max_m = std::max<int64_t>(max_m, int64_t(assigned[size_t(e0 + g)].size()));
  if (max_m == 0) return;
  for (int64_t g = 0; g < G; ++g) {
    counts[size_t(g)] = int32_t(assigned[size_t(e0 + g)].size());
    base[size_t(g)] = masked ? g * max_m : slots;
    slots = masked ? (g + 1) * max_m : slots + counts[size_t(g)];
    ends[size_t(g)] = int32_t(slots);
  }
  const int64_t sk = dim / 128, si = inter / 128;
  std::vector<uint8_t> a(size_t(slots * dim));
  std::vector<float> sa(size_t(slots * sk), 1.0f);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < counts[size_t(g)]; ++i) {
      const int64_t t = assigned[size_t(e0 + g)][size_t(i)] / topk, slot = base[size_t(g)] + i;
      std::copy_n(xq.codes.data() + t * dim, dim, a.data() + slot * dim);
      std::copy_n(xq.scales.data() + t * sk, sk, sa.data() + slot * sk);
    }
  const TensorView masked_m(counts.data(), DType::kI32, {G});
  gemm::ContiguousLayout layout;
  layout.grouped_layout = TensorView(ends.data(), DType::kI32, {G});
  layout.use_psum_layout = true;
  layout.mk_alignment = 1;
  auto run = [&](const gemm::ScaledTensor& w, uint8_t* codes, float* scales, int64_t k, int64_t n, uint16_t* d) {
    if (masked) {
      gemm::m_grouped_fp8_fp4_gemm_nt_masked(
          {TensorView(codes, DType::kF8E4M3, {G, max_m, k}), TensorView(scales, DType::kF32, {G, max_m, k / 128})}, w,
          TensorView(d, DType::kBF16, {G, max_m, n}), masked_m, max_m, recipe);
    } else {
      gemm::m_grouped_fp8_fp4_gemm_nt_contiguous(
          {TensorView(codes, DType::kF8E4M3, {slots, k}), TensorView(scales, DType::kF32, {slots, k / 128})}, w,
          TensorView(d, DType::kBF16, {slots, n}), layout, recipe);
    }
  };
  std::vector<uint16_t> g(size_t(slots * inter)), u(size_t(slots * inter));
  run(gate, a.data(), sa.data(), dim, inter, g.data());
  run(up, a.data(), sa.data(), dim, inter, u.data());
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
  std::vector<uint16_t> y(size_t(slots * dim));
  run(down, a2.data(), sa2.data(), inter, dim, y.data());
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t i = 0; i < counts[size_t(gi)]; ++i) {
      const int64_t slot = base[size_t(gi)] + i, item = assigned[size_t(e0 + gi)][size_t(i)];
      for (int64_t j = 0; j < dim; ++j) expert_out[size_t(item * dim + j)] = bf16_to_f32(y[size_t(slot * dim + j)]);
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
    mlp_rows(mlp, x, &xq, rows, out, ue8m0);
  } else {
    mlp_rows(mlp, x, nullptr, rows, out, ue8m0);
  }
}

void moe_forward(ModelState& m, int64_t layer, const float* x, int64_t rows, float* out, StepTimer& timer,
                 int64_t expert_begin, int64_t expert_end, bool decode) {
  const Config& c = m.config;
  const LayerWeights& w = m.weights.layers[size_t(layer)];
  const int64_t E = c.n_routed_experts, topk = c.n_activated_experts, dim = c.dim;
  const bool ue8m0 = c.ue8m0(), fp8 = c.fp8();

  std::vector<float> logits(size_t(rows * E));
  matmul_bf16_f32(x, rows, w.gate, E, dim, logits.data());
  const Routing routing = route(c, w, logits.data(), rows);
  timer.lap(Component::kGate);

  // Rows routed to each expert, in row order; each expert runs once over its gathered rows.
  std::vector<std::vector<int64_t>> assigned(static_cast<size_t>(E));  // entries t * topk + k
  for (int64_t i = 0; i < rows * topk; ++i) assigned[size_t(routing.experts[size_t(i)])].push_back(i);
  QuantRows xq;
  if (fp8) xq = quantize_activations(x, rows, dim, ue8m0);
  std::vector<float> expert_out(size_t(rows * topk * dim), 0.0f);
  const bool grouped = fp8 && w.bank.grouped && expert_end > expert_begin;
  for (int64_t e = expert_begin; e < expert_end; ++e) timer.count_routed_experts(assigned[size_t(e)].empty() ? 0 : 1);
  if (grouped) grouped_experts(w.bank, expert_begin, expert_end, assigned, xq, topk, decode, ue8m0, expert_out.data());
  for (int64_t e = expert_begin; e < (grouped ? expert_begin : expert_end); ++e) {
    const std::vector<int64_t>& items = assigned[size_t(e)];
    const int64_t n = int64_t(items.size());
    if (n == 0) continue;
    std::vector<float> y(size_t(n * dim));
    if (fp8) {
      QuantRows g;
      g.rows = n;
      g.k = dim;
      g.codes.resize(size_t(n * dim));
      g.scales.resize(size_t(n * (dim / 128)));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t = items[size_t(i)] / topk;
        std::copy_n(xq.codes.data() + t * dim, dim, g.codes.data() + i * dim);
        std::copy_n(xq.scales.data() + t * (dim / 128), dim / 128, g.scales.data() + i * (dim / 128));
      }
      mlp_rows(w.experts[size_t(e)], nullptr, &g, n, y.data(), ue8m0, true);
    } else {
      std::vector<float> g(size_t(n * dim));
      for (int64_t i = 0; i < n; ++i) std::copy_n(x + items[size_t(i)] / topk * dim, dim, g.data() + i * dim);
      mlp_rows(w.experts[size_t(e)], g.data(), nullptr, n, y.data(), ue8m0, true);
    }
    for (int64_t i = 0; i < n; ++i) std::copy_n(y.data() + i * dim, dim, expert_out.data() + items[size_t(i)] * dim);
  }
  for (int64_t t = 0; t < rows; ++t) {
    float* o = out + t * dim;
    std::fill(o, o + dim, 0.0f);
    for (int64_t k = 0; k < topk; ++k) {
      const float wt = routing.weights[size_t(t * topk + k)];
      const float* y = expert_out.data() + (t * topk + k) * dim;
      for (int64_t j = 0; j < dim; ++j) o[j] += wt * y[j];
    }
  }
  timer.lap(Component::kExperts);

  if (w.has_shared) {
    std::vector<float> z(size_t(rows * dim));
    if (fp8)
      mlp_rows(w.shared, nullptr, &xq, rows, z.data(), ue8m0);
    else
      mlp_rows(w.shared, x, nullptr, rows, z.data(), ue8m0);
    for (size_t i = 0; i < z.size(); ++i) out[i] += z[i];
  }
  timer.lap(Component::kShared);
}

}  // namespace tessera::model
