// Weight binding: every tensor of docs/model.md's checkpoint table looked up, checked and viewed in place.
#include "weights.h"

#include <array>
#include <cstring>

#include "tessera/core/error.h"

namespace tessera::model {
namespace {

struct Binder {
  const TensorStore& store;
  const Config& c;

  Linear linear(const std::string& name, int64_t n, int64_t k) const {
    Linear l;
    l.name = name;
    l.n = n;
    l.k = k;
    l.fp8 = c.fp8();
    const std::string w = name + ".weight";
    if (l.fp8) {
      l.weight = store.require(w, {DType::kF8E4M3}, {n, k}).data;
      l.scale = reinterpret_cast<const float*>(
          store.require(w + "_scale_inv", {DType::kF32}, {(n + 127) / 128, (k + 127) / 128}).data);
    } else {
      l.weight = store.require(w, {DType::kBF16}, {n, k}).data;
    }
    return l;
  }

  std::vector<float> vec(const std::string& name, int64_t n) const {
    const StoredTensor& t = store.require(name, {DType::kBF16, DType::kF32}, {n});
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (t.dtype == DType::kF32) {
        std::memcpy(&out[size_t(i)], t.data + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        out[size_t(i)] = bf16_to_f32(h);
      }
    }
    return out;
  }

  const uint16_t* bf16(const std::string& name, std::vector<int64_t> shape) const {
    return reinterpret_cast<const uint16_t*>(store.require(name, {DType::kBF16}, shape).data);
  }

  Mlp mlp(const std::string& prefix, int64_t inter) const {
    return Mlp{linear(prefix + ".gate_proj", inter, c.dim), linear(prefix + ".up_proj", inter, c.dim),
               linear(prefix + ".down_proj", c.dim, inter)};
  }
};

// The projections of all experts as one strided view, or false when their addresses are not evenly spaced.
bool stack_linears(const std::vector<const Linear*>& ls, gemm::ScaledTensor* out) {
  const Linear& l0 = *ls[0];
  const int64_t G = int64_t(ls.size()), sn = (l0.n + 127) / 128, sk = (l0.k + 127) / 128;
  const int64_t dw = G > 1 ? ls[1]->weight - l0.weight : l0.n * l0.k;
  const int64_t ds =
      G > 1 ? reinterpret_cast<const uint8_t*>(ls[1]->scale) - reinterpret_cast<const uint8_t*>(l0.scale) : sn * sk * 4;
  if (dw < l0.n * l0.k || ds < sn * sk * 4 || ds % 4 != 0) return false;
  for (int64_t e = 0; e < G; ++e) {
    const Linear& l = *ls[size_t(e)];
    if (l.weight != l0.weight + e * dw ||
        reinterpret_cast<const uint8_t*>(l.scale) != reinterpret_cast<const uint8_t*>(l0.scale) + e * ds)
      return false;
  }
  out->data = TensorView(const_cast<uint8_t*>(l0.weight), DType::kF8E4M3, {G, l0.n, l0.k}, {dw, l0.k, 1});
  out->scale = TensorView(const_cast<float*>(l0.scale), DType::kF32, {G, sn, sk}, {ds / 4, sk, 1});
  return true;
}

ExpertBank make_bank(const std::vector<Mlp>& experts) {
  ExpertBank bank;
  if (experts.empty() || !experts[0].gate.fp8) return bank;
  std::vector<const Linear*> gate, up, down;
  for (const Mlp& m : experts) {
    gate.push_back(&m.gate);
    up.push_back(&m.up);
    down.push_back(&m.down);
  }
  bank.grouped = stack_linears(gate, &bank.gate) && stack_linears(up, &bank.up) && stack_linears(down, &bank.down);
  return bank;
}

}  // namespace

void Linear::row_f32(int64_t r, float* out) const {
  if (fp8) {
    // A 256-entry table: this runs over kv_b's rows every step.
    static const auto kE4m3 = [] {
      std::array<float, 256> t{};
      for (int i = 0; i < 256; ++i) t[size_t(i)] = e4m3_to_f32(uint8_t(i));
      return t;
    }();
    const uint8_t* w = weight + r * k;
    const float* s = scale + (r / 128) * ((k + 127) / 128);
    for (int64_t j = 0; j < k; ++j) out[j] = kE4m3[w[j]] * s[j / 128];
  } else {
    const uint8_t* w = weight + 2 * r * k;
    for (int64_t j = 0; j < k; ++j) {
      uint16_t h;
      std::memcpy(&h, w + 2 * j, 2);
      out[j] = bf16_to_f32(h);
    }
  }
}

Weights bind_weights(const TensorStore& store, const Config& c) {
  const Binder b{store, c};
  Weights w;
  w.embed = b.bf16("model.embed_tokens.weight", {c.vocab_size, c.dim});
  w.head = b.bf16("lm_head.weight", {c.vocab_size, c.dim});
  w.final_norm = b.vec("model.norm.weight", c.dim);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string a = p + "self_attn.";
    LayerWeights L;
    L.attn_norm = b.vec(p + "input_layernorm.weight", c.dim);
    L.ffn_norm = b.vec(p + "post_attention_layernorm.weight", c.dim);
    L.q_a = b.linear(a + "q_a_proj", c.q_lora_rank, c.dim);
    L.q_a_norm = b.vec(a + "q_a_layernorm.weight", c.q_lora_rank);
    L.q_b = b.linear(a + "q_b_proj", c.n_heads * c.qk_head_dim(), c.q_lora_rank);
    L.kv_a = b.linear(a + "kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, c.dim);
    L.kv_a_norm = b.vec(a + "kv_a_layernorm.weight", c.kv_lora_rank);
    L.kv_b = b.linear(a + "kv_b_proj", c.n_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    L.o_proj = b.linear(a + "o_proj", c.dim, c.n_heads * c.v_head_dim);
    {
      const int64_t nope = c.qk_nope_head_dim, v = c.v_head_dim, lat = c.kv_lora_rank;
      L.kv_b_absorbed.resize(size_t(L.kv_b.n * lat));
      std::vector<float> row(static_cast<size_t>(lat));
      for (int64_t r = 0; r < L.kv_b.n; ++r) {
        L.kv_b.row_f32(r, row.data());
        const int64_t h = r / (nope + v), j = r % (nope + v);
        uint16_t* head = L.kv_b_absorbed.data() + h * (nope + v) * lat;
        for (int64_t x = 0; x < lat; ++x) {
          const uint16_t b = f32_to_bf16(row[size_t(x)]);
          if (j < nope) {
            head[x * nope + j] = b;  // W_uk row j -> column j of the transpose
          } else {
            head[nope * lat + (j - nope) * lat + x] = b;
          }
        }
      }
    }
    L.index_wq_b = b.linear(a + "indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
    L.index_wk = b.linear(a + "indexer.wk", c.index_head_dim, c.dim);
    L.index_k_norm_w = b.vec(a + "indexer.k_norm.weight", c.index_head_dim);
    L.index_k_norm_b = b.vec(a + "indexer.k_norm.bias", c.index_head_dim);
    L.index_weights_proj = b.bf16(a + "indexer.weights_proj.weight", {c.index_n_heads, c.dim});
    L.moe = c.is_moe_layer(l);
    if (!L.moe) {
      L.dense = b.mlp(p + "mlp", c.inter_dim);
    } else {
      L.gate = b.bf16(p + "mlp.gate.weight", {c.n_routed_experts, c.dim});
      if (c.dim == 7168) {
        const StoredTensor& t =
            store.require(p + "mlp.gate.e_score_correction_bias", {DType::kF32}, {c.n_routed_experts});
        L.gate_bias.resize(size_t(c.n_routed_experts));
        std::memcpy(L.gate_bias.data(), t.data, size_t(4 * c.n_routed_experts));
      }
      for (int64_t e = 0; e < c.n_routed_experts; ++e)
        L.experts.push_back(b.mlp(p + "mlp.experts." + std::to_string(e), c.moe_inter_dim));
      L.bank = make_bank(L.experts);
      L.has_shared = c.n_shared_experts > 0;
      if (L.has_shared) L.shared = b.mlp(p + "mlp.shared_experts", c.n_shared_experts * c.moe_inter_dim);
    }
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace tessera::model
