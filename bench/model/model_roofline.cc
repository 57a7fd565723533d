#include "model/model_roofline.h"

#include <algorithm>

namespace tessera::bench {
namespace {

constexpr double kBf16 = 2, kF32 = 4;
constexpr double kLatentBytes = 656, kIndexKeyBytes = 128 + 4;  // FlashMLA V32 token; e4m3 key + scale

// A linear's weight bytes: e4m3 codes and f32 128x128 block scales, or bf16.
double linear_bytes(const model::Config& c, int64_t n, int64_t k) {
  if (!c.fp8()) return kBf16 * double(n) * double(k);
  return double(n) * double(k) + kF32 * double((n + 127) / 128) * double((k + 127) / 128);
}

// A linear over `rows` tokens: its weight read once, 2 n k flops per token.
StepCost linear(const model::Config& c, int64_t rows, int64_t n, int64_t k) {
  StepCost s;
  s.weight_bytes = linear_bytes(c, n, k);
  s.gemm_flops = 2.0 * double(rows) * double(n) * double(k);
  return s;
}

}  // namespace

StepCost& StepCost::operator+=(const StepCost& o) {
  weight_bytes += o.weight_bytes;
  kv_bytes += o.kv_bytes;
  gemm_flops += o.gemm_flops;
  attention_flops += o.attention_flops;
  return *this;
}

StepCost operator*(double times, const StepCost& c) {
  StepCost s;
  s.weight_bytes = times * c.weight_bytes;
  s.kv_bytes = times * c.kv_bytes;
  s.gemm_flops = times * c.gemm_flops;
  s.attention_flops = times * c.attention_flops;
  return s;
}

StepCost attention_layer_cost(const model::Config& c, int64_t batch, int64_t context) {
  const int64_t h = c.n_heads, lat = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  StepCost s;
  s += linear(c, batch, c.q_lora_rank, c.dim);                               // q_a_proj
  s += linear(c, batch, h * c.qk_head_dim(), c.q_lora_rank);                 // q_b_proj
  s += linear(c, batch, lat + rope, c.dim);                                  // kv_a_proj_with_mqa
  s += linear(c, batch, h * (c.qk_nope_head_dim + c.v_head_dim), lat);       // kv_b_proj (W_uk, W_uv)
  s += linear(c, batch, c.dim, h * c.v_head_dim);                            // o_proj
  s += linear(c, batch, c.index_n_heads * c.index_head_dim, c.q_lora_rank);  // indexer.wq_b
  s += linear(c, batch, c.index_head_dim, c.dim);                            // indexer.wk
  s.weight_bytes += kBf16 * double(c.index_n_heads) * double(c.dim);         // indexer.weights_proj
  s.gemm_flops += 2.0 * double(batch) * double(c.index_n_heads) * double(c.dim);
  s.weight_bytes += kBf16 * double(2 * c.dim + c.q_lora_rank + lat + 2 * c.index_head_dim);  // norms
  // The indexer scores every cached key; MLA attends to the selected ones (latent . q_lat + rope).
  const double selected = double(std::min(c.index_topk, context));
  s.kv_bytes = double(batch) * (double(context) * kIndexKeyBytes + selected * kLatentBytes);
  s.attention_flops = 2.0 * double(batch) *
                      (double(context) * double(c.index_n_heads) * double(c.index_head_dim) +
                       selected * double(h) * double(lat + rope + lat));
  return s;
}

StepCost dense_mlp_cost(const model::Config& c, int64_t batch) {
  return 3.0 * linear(c, batch, c.inter_dim, c.dim);
}

StepCost moe_cost(const model::Config& c, int64_t batch, int64_t routed_experts_run) {
  StepCost s;
  s.weight_bytes = kBf16 * double(c.n_routed_experts) * double(c.dim) + kF32 * double(c.n_routed_experts);
  s.gemm_flops = 2.0 * double(batch) * double(c.n_routed_experts) * double(c.dim);
  // Routed experts: each one that had rows is read once; every token runs n_activated_experts of them.
  StepCost expert = 3.0 * linear(c, batch, c.moe_inter_dim, c.dim);
  s.weight_bytes += double(routed_experts_run) * expert.weight_bytes;
  s.gemm_flops += double(c.n_activated_experts) * expert.gemm_flops;
  if (c.n_shared_experts > 0) s += 3.0 * linear(c, batch, c.n_shared_experts * c.moe_inter_dim, c.dim);
  return s;
}

StepCost ends_cost(const model::Config& c, int64_t batch) {
  StepCost s;
  s.weight_bytes = kBf16 * double(batch) * double(c.dim)            // embedding rows
                   + kBf16 * double(c.dim)                          // final norm
                   + kBf16 * double(c.vocab_size) * double(c.dim);  // lm_head
  s.gemm_flops = 2.0 * double(batch) * double(c.vocab_size) * double(c.dim);
  return s;
}

double roofline_seconds(const StepCost& cost, double dram_read_gbps, double peak_gflops) {
  return std::max(cost.bytes() / (dram_read_gbps * 1e9), cost.flops() / (peak_gflops * 1e9));
}

}  // namespace tessera::bench
