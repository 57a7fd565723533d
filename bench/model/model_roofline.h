// What one decode step of a DeepSeek-V3.2 model must read and compute: the denominators of
// `tessera bench model`'s roofline. Bytes are those of the checkpoint's formats (FP8 weights with their
// block scales, bf16 embeddings and head, the FP8 caches), read once per step; compute counts 2 flops
// per multiply-add of the linears, the absorbed MLA products, the indexer and the attention.
#pragma once

#include <cstdint>

#include "tessera/model.h"

namespace tessera::bench {

struct StepCost {
  double weight_bytes = 0, kv_bytes = 0;  // read by the step
  double gemm_flops = 0;                  // linears, absorbed MLA products, gate, head
  double attention_flops = 0;             // indexer logits and sparse MLA
  double bytes() const { return weight_bytes + kv_bytes; }
  double flops() const { return gemm_flops + attention_flops; }
  StepCost& operator+=(const StepCost& o);
};
StepCost operator*(double times, const StepCost& c);

// One layer's share of a decode step of `batch` sequences that each hold `context` tokens after the
// step's token. moe layers: `routed_experts_run` distinct routed experts had rows in the step.
StepCost attention_layer_cost(const model::Config& c, int64_t batch, int64_t context);
StepCost dense_mlp_cost(const model::Config& c, int64_t batch);
StepCost moe_cost(const model::Config& c, int64_t batch, int64_t routed_experts_run);
// Embedding rows, final norm and the LM head.
StepCost ends_cost(const model::Config& c, int64_t batch);

// The roofline time of a cost: the larger of bytes / read bandwidth and flops / peak.
double roofline_seconds(const StepCost& cost, double dram_read_gbps, double peak_gflops);

}  // namespace tessera::bench
