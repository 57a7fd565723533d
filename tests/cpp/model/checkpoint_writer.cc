// Test checkpoints (checkpoint_writer.h).
#include "checkpoint_writer.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tessera/core/dtype.h"
#include "tessera/core/json.h"

namespace tessera::model::testing {
namespace {

struct Writer {
  std::mt19937_64 gen;
  std::vector<RawTensor> tensors;
  bool fp8;

  std::vector<float> normal(int64_t n, double stddev, double mean = 0) {
    std::normal_distribution<double> d(mean, stddev);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = float(d(gen));
    return v;
  }
  void bf16(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    RawTensor t{name, "BF16", shape, std::vector<uint8_t>(v.size() * 2)};
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = f32_to_bf16(v[i]);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
    tensors.push_back(std::move(t));
  }
  void f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    RawTensor t{name, "F32", shape, std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    tensors.push_back(std::move(t));
  }
  void norm(const std::string& name, int64_t n) {
    const std::vector<float> v = normal(n, 0.1, 1.0);
    if (tensors.size() % 2)
      f32(name, {n}, v);  // both allowed dtypes appear
    else
      bf16(name, {n}, v);
  }
  void linear(const std::string& name, int64_t n, int64_t k) {
    const std::vector<float> w = normal(n * k, 1.0 / std::sqrt(double(k)));
    if (!fp8) {
      bf16(name + ".weight", {n, k}, w);
      return;
    }
    const int64_t bn = (n + 127) / 128, bk = (k + 127) / 128;
    std::vector<float> scales(size_t(bn * bk));
    RawTensor t{name + ".weight", "F8_E4M3", {n, k}, std::vector<uint8_t>(size_t(n * k))};
    for (int64_t i = 0; i < bn; ++i)
      for (int64_t j = 0; j < bk; ++j) {
        float amax = 0;
        for (int64_t r = i * 128; r < std::min(n, i * 128 + 128); ++r)
          for (int64_t c = j * 128; c < std::min(k, j * 128 + 128); ++c)
            amax = std::max(amax, std::fabs(w[size_t(r * k + c)]));
        const float s = amax > 0 ? amax / 448 : 1.0f;
        scales[size_t(i * bk + j)] = s;
        for (int64_t r = i * 128; r < std::min(n, i * 128 + 128); ++r)
          for (int64_t c = j * 128; c < std::min(k, j * 128 + 128); ++c)
            t.bytes[size_t(r * k + c)] = f32_to_e4m3_sat(w[size_t(r * k + c)] / s);
      }
    tensors.push_back(std::move(t));
    f32(name + ".weight_scale_inv", {bn, bk}, scales);
  }
  void mlp(const std::string& p, int64_t dim, int64_t inter) {
    linear(p + ".gate_proj", inter, dim);
    linear(p + ".up_proj", inter, dim);
    linear(p + ".down_proj", dim, inter);
  }
};

}  // namespace

std::vector<uint8_t> encode_safetensors(const std::vector<RawTensor>& tensors) {
  std::string header = "{";
  size_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const RawTensor& t = tensors[i];
    header += (i ? "," : "") + json_quote(t.name) + ":{\"dtype\":" + json_quote(t.dtype) + ",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) header += (d ? "," : "") + std::to_string(t.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::vector<uint8_t> out(8);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  for (const RawTensor& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::string config_json(const Config& c) {
  std::ostringstream o;
  o.precision(17);
  o << "{\"vocab_size\": " << c.vocab_size << ", \"dim\": " << c.dim << ", \"inter_dim\": " << c.inter_dim
    << ", \"moe_inter_dim\": " << c.moe_inter_dim << ", \"n_layers\": " << c.n_layers
    << ", \"n_dense_layers\": " << c.n_dense_layers << ", \"n_heads\": " << c.n_heads
    << ", \"n_routed_experts\": " << c.n_routed_experts << ", \"n_shared_experts\": " << c.n_shared_experts
    << ", \"n_activated_experts\": " << c.n_activated_experts << ", \"n_expert_groups\": " << c.n_expert_groups
    << ", \"n_limited_groups\": " << c.n_limited_groups << ", \"score_func\": " << json_quote(c.score_func)
    << ", \"route_scale\": " << c.route_scale << ", \"q_lora_rank\": " << c.q_lora_rank
    << ", \"kv_lora_rank\": " << c.kv_lora_rank << ", \"qk_nope_head_dim\": " << c.qk_nope_head_dim
    << ", \"qk_rope_head_dim\": " << c.qk_rope_head_dim << ", \"v_head_dim\": " << c.v_head_dim
    << ", \"original_seq_len\": " << c.original_seq_len << ", \"rope_theta\": " << c.rope_theta
    << ", \"rope_factor\": " << c.rope_factor << ", \"beta_fast\": " << c.beta_fast
    << ", \"beta_slow\": " << c.beta_slow << ", \"mscale\": " << c.mscale << ", \"max_seq_len\": " << c.max_seq_len
    << ", \"max_batch_size\": " << c.max_batch_size << ", \"index_n_heads\": " << c.index_n_heads
    << ", \"index_head_dim\": " << c.index_head_dim << ", \"index_topk\": " << c.index_topk
    << ", \"dtype\": " << json_quote(c.dtype)
    << ", \"scale_fmt\": " << (c.scale_fmt.empty() ? std::string("null") : json_quote(c.scale_fmt)) << "}";
  return o.str();
}

Config tiny_config(bool fp8) {
  Config c;
  c.vocab_size = 300;
  c.dim = 256;
  c.inter_dim = 384;
  c.moe_inter_dim = 128;
  c.n_layers = 2;
  c.n_dense_layers = 1;
  c.n_heads = 2;
  c.n_routed_experts = 8;
  c.n_shared_experts = 1;
  c.n_activated_experts = 2;
  c.n_expert_groups = 2;
  c.n_limited_groups = 1;
  c.score_func = "sigmoid";
  c.route_scale = 1.5;
  c.q_lora_rank = 128;
  c.qk_nope_head_dim = 32;
  c.v_head_dim = 64;
  c.original_seq_len = 64;
  c.max_seq_len = 256;  // > original_seq_len: YaRN and the mscale softmax factor apply
  c.max_batch_size = 4;
  c.index_n_heads = 4;
  c.index_topk = 16;
  c.dtype = fp8 ? "fp8" : "bf16";
  return c;
}

void write_random_checkpoint(const std::string& dir, const Config& c, uint64_t seed, int files) {
  std::filesystem::create_directories(dir);
  Writer w{std::mt19937_64(seed), {}, c.fp8()};
  w.bf16("model.embed_tokens.weight", {c.vocab_size, c.dim}, w.normal(c.vocab_size * c.dim, 1.0));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.";
    w.norm(p + "input_layernorm.weight", c.dim);
    w.norm(p + "post_attention_layernorm.weight", c.dim);
    w.linear(a + "q_a_proj", c.q_lora_rank, c.dim);
    w.norm(a + "q_a_layernorm.weight", c.q_lora_rank);
    w.linear(a + "q_b_proj", c.n_heads * c.qk_head_dim(), c.q_lora_rank);
    w.linear(a + "kv_a_proj_with_mqa", c.kv_lora_rank + c.qk_rope_head_dim, c.dim);
    w.norm(a + "kv_a_layernorm.weight", c.kv_lora_rank);
    w.linear(a + "kv_b_proj", c.n_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    w.linear(a + "o_proj", c.dim, c.n_heads * c.v_head_dim);
    w.linear(a + "indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
    w.linear(a + "indexer.wk", c.index_head_dim, c.dim);
    w.norm(a + "indexer.k_norm.weight", c.index_head_dim);
    w.f32(a + "indexer.k_norm.bias", {c.index_head_dim}, w.normal(c.index_head_dim, 0.1));
    w.bf16(a + "indexer.weights_proj.weight", {c.index_n_heads, c.dim},
           w.normal(c.index_n_heads * c.dim, 1.0 / std::sqrt(double(c.dim))));
    if (!c.is_moe_layer(l)) {
      w.mlp(p + "mlp", c.dim, c.inter_dim);
      continue;
    }
    w.bf16(p + "mlp.gate.weight", {c.n_routed_experts, c.dim},
           w.normal(c.n_routed_experts * c.dim, 1.0 / std::sqrt(double(c.dim))));
    if (c.dim == 7168)
      w.f32(p + "mlp.gate.e_score_correction_bias", {c.n_routed_experts}, w.normal(c.n_routed_experts, 0.1));
    for (int64_t e = 0; e < c.n_routed_experts; ++e)
      w.mlp(p + "mlp.experts." + std::to_string(e), c.dim, c.moe_inter_dim);
    if (c.n_shared_experts > 0) w.mlp(p + "mlp.shared_experts", c.dim, c.n_shared_experts * c.moe_inter_dim);
  }
  w.norm("model.norm.weight", c.dim);
  w.bf16("lm_head.weight", {c.vocab_size, c.dim}, w.normal(c.vocab_size * c.dim, 1.0 / std::sqrt(double(c.dim))));
  // Tensors alternate between the files, so a layer's tensors are spread over all of them.
  std::vector<std::vector<RawTensor>> parts(static_cast<size_t>(files));
  for (size_t i = 0; i < w.tensors.size(); ++i) parts[i % size_t(files)].push_back(std::move(w.tensors[i]));
  for (int f = 0; f < files; ++f)
    write_file(dir + "/model-" + std::to_string(f) + ".safetensors", encode_safetensors(parts[size_t(f)]));
  std::ofstream(dir + "/config.json") << config_json(c);
}

std::string make_temp_dir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/tessera_model_" + tag + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) return "";
  return std::string(buf.data());
}

}  // namespace tessera::model::testing
