// The model's weights bound in place from the checkpoint's mappings, each checked against
// docs/model.md's table (name, dtype, shape). Norm vectors are small and converted to f32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "safetensors.h"
#include "tessera/gemm.h"
#include "tessera/model.h"

namespace tessera::model {

// A linear layer y = x W^T, W [n, k]: e4m3 with f32 128x128 block scales [ceil(n/128), ceil(k/128)]
// (fp8), or bf16 (scale == nullptr).
struct Linear {
  std::string name;
  const uint8_t* weight = nullptr;
  const float* scale = nullptr;
  int64_t n = 0, k = 0;
  bool fp8 = false;
  // Row r of W as f32 (dequantised), for the absorbed attention products.
  void row_f32(int64_t r, float* out) const;
};

struct Mlp {
  Linear gate, up, down;  // down(silu(gate(x)) * up(x))
};

// A MoE layer's routed experts as [G, N, K] operands (scales [G, ceil(N/128), K/128]) for the FP8
// M-grouped GEMMs, viewed in place: possible when the checkpoint stores each projection of consecutive
// experts at one constant stride (as tessera.model.random_checkpoint does). Otherwise grouped is false and
// each expert runs as its own GEMM.
struct ExpertBank {
  bool grouped = false;
  gemm::ScaledTensor gate, up, down;
};

struct LayerWeights {
  // kv_b_proj in bf16 (DeepSeek's weight_dequant for FP8 checkpoints) for the absorbed products, per head
  // [W_uk transposed: kv_lora_rank x nope | W_uv: v x kv_lora_rank]: both products then contract a
  // contiguous dimension and take the decode GEMV (W_uk as stored, nope x kv_lora_rank, had the GEMM
  // copy it every step).
  std::vector<uint16_t> kv_b_absorbed;
  std::vector<float> attn_norm, ffn_norm, q_a_norm, kv_a_norm, index_k_norm_w, index_k_norm_b;
  Linear q_a, q_b, kv_a, kv_b, o_proj, index_wq_b, index_wk;
  const uint16_t* index_weights_proj = nullptr;  // bf16 [index_n_heads, dim]
  bool moe = false;
  Mlp dense;                       // dense layers
  const uint16_t* gate = nullptr;  // MoE: bf16 [n_routed_experts, dim]
  std::vector<float> gate_bias;    // MoE with dim == 7168: e_score_correction_bias
  std::vector<Mlp> experts;        // MoE: routed experts
  ExpertBank bank;                 // MoE, FP8: the experts for the grouped GEMMs
  bool has_shared = false;
  Mlp shared;  // MoE: shared experts as one MLP
};

struct Weights {
  const uint16_t* embed = nullptr;  // bf16 [vocab_size, dim]
  const uint16_t* head = nullptr;   // bf16 [vocab_size, dim]
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;
};

Weights bind_weights(const TensorStore& store, const Config& config);

}  // namespace tessera::model
