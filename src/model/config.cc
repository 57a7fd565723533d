// Model config: JSON -> Config with strict key and type checks, then the sizes tessera's kernels need.
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "tessera/core/error.h"
#include "tessera/core/json.h"
#include "tessera/model.h"

namespace tessera::model {
namespace {

int64_t as_int(const JsonValue& v, const std::string& what, const std::string& key) {
  if (v.kind != JsonValue::Kind::kNumber || !v.is_integer)
    fail(ErrorCode::kInvalidArgument, what, ": key '", key, "' must be an integer, got ",
         v.kind == JsonValue::Kind::kNumber ? "a fraction" : JsonValue::kind_name(v.kind));
  return v.integer;
}

double as_number(const JsonValue& v, const std::string& what, const std::string& key) {
  if (v.kind != JsonValue::Kind::kNumber)
    fail(ErrorCode::kInvalidArgument, what, ": key '", key, "' must be a number, got ", JsonValue::kind_name(v.kind));
  return v.number;
}

}  // namespace

Config Config::from_json(const std::string& text, const std::string& what) {
  const JsonValue root = json_parse(text, what);
  if (root.kind != JsonValue::Kind::kObject)
    fail(ErrorCode::kInvalidArgument, what, ": must be a JSON object, got ", JsonValue::kind_name(root.kind));
  Config c;
  using Setter = std::function<void(const JsonValue&, const std::string&)>;
  auto integer = [&](int64_t& field) -> Setter {
    return [&field, &what](const JsonValue& v, const std::string& k) { field = as_int(v, what, k); };
  };
  auto number = [&](double& field) -> Setter {
    return [&field, &what](const JsonValue& v, const std::string& k) { field = as_number(v, what, k); };
  };
  const std::vector<std::pair<const char*, Setter>> keys = {
      {"vocab_size", integer(c.vocab_size)},
      {"dim", integer(c.dim)},
      {"inter_dim", integer(c.inter_dim)},
      {"moe_inter_dim", integer(c.moe_inter_dim)},
      {"n_layers", integer(c.n_layers)},
      {"n_dense_layers", integer(c.n_dense_layers)},
      {"n_heads", integer(c.n_heads)},
      {"n_routed_experts", integer(c.n_routed_experts)},
      {"n_shared_experts", integer(c.n_shared_experts)},
      {"n_activated_experts", integer(c.n_activated_experts)},
      {"n_expert_groups", integer(c.n_expert_groups)},
      {"n_limited_groups", integer(c.n_limited_groups)},
      {"score_func",
       [&](const JsonValue& v, const std::string& k) {
         if (v.kind != JsonValue::Kind::kString)
           fail(ErrorCode::kInvalidArgument, what, ": key '", k, "' must be a string, got ",
                JsonValue::kind_name(v.kind));
         c.score_func = v.string;
       }},
      {"route_scale", number(c.route_scale)},
      {"q_lora_rank", integer(c.q_lora_rank)},
      {"kv_lora_rank", integer(c.kv_lora_rank)},
      {"qk_nope_head_dim", integer(c.qk_nope_head_dim)},
      {"qk_rope_head_dim", integer(c.qk_rope_head_dim)},
      {"v_head_dim", integer(c.v_head_dim)},
      {"original_seq_len", integer(c.original_seq_len)},
      {"rope_theta", number(c.rope_theta)},
      {"rope_factor", number(c.rope_factor)},
      {"beta_fast", number(c.beta_fast)},
      {"beta_slow", number(c.beta_slow)},
      {"mscale", number(c.mscale)},
      {"max_seq_len", integer(c.max_seq_len)},
      {"max_batch_size", integer(c.max_batch_size)},
      {"index_n_heads", integer(c.index_n_heads)},
      {"index_head_dim", integer(c.index_head_dim)},
      {"index_topk", integer(c.index_topk)},
      {"dtype",
       [&](const JsonValue& v, const std::string& k) {
         if (v.kind != JsonValue::Kind::kString)
           fail(ErrorCode::kInvalidArgument, what, ": key '", k, "' must be a string, got ",
                JsonValue::kind_name(v.kind));
         c.dtype = v.string;
       }},
      {"scale_fmt",
       [&](const JsonValue& v, const std::string& k) {
         if (v.kind == JsonValue::Kind::kNull) {
           c.scale_fmt.clear();
           return;
         }
         if (v.kind != JsonValue::Kind::kString)
           fail(ErrorCode::kInvalidArgument, what, ": key '", k, "' must be null or a string, got ",
                JsonValue::kind_name(v.kind));
         c.scale_fmt = v.string;
       }},
  };
  for (const auto& [key, value] : root.object) {
    bool known = false;
    for (const auto& [name, set] : keys)
      if (key == name) {
        set(value, key);
        known = true;
        break;
      }
    if (!known) fail(ErrorCode::kInvalidArgument, what, ": unknown key '", key, "'");
  }
  c.validate(what);
  return c;
}

Config Config::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kInvalidArgument, "model config: cannot open '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  return from_json(text.str(), path);
}

void Config::validate(const std::string& what) const {
  auto need = [&](bool ok, const char* key, const auto&... rule) {
    if (!ok) fail(ErrorCode::kInvalidArgument, what, ": key '", key, "' ", rule...);
  };
  need(vocab_size > 0, "vocab_size", "must be > 0, got ", vocab_size);
  need(dim > 0 && dim % 128 == 0, "dim", "must be a positive multiple of 128 (FP8 block scales), got ", dim);
  need(inter_dim > 0 && inter_dim % 128 == 0, "inter_dim", "must be a positive multiple of 128, got ", inter_dim);
  need(moe_inter_dim > 0 && moe_inter_dim % 128 == 0, "moe_inter_dim", "must be a positive multiple of 128, got ",
       moe_inter_dim);
  need(n_layers > 0, "n_layers", "must be > 0, got ", n_layers);
  need(n_dense_layers >= 0 && n_dense_layers <= n_layers, "n_dense_layers", "must be in [0, n_layers], got ",
       n_dense_layers);
  need(n_heads > 0, "n_heads", "must be > 0, got ", n_heads);
  const bool has_moe = n_dense_layers < n_layers;
  if (has_moe) {
    need(n_routed_experts > 0, "n_routed_experts", "must be > 0, got ", n_routed_experts);
    need(n_shared_experts >= 0, "n_shared_experts", "must be >= 0, got ", n_shared_experts);
    need(n_activated_experts > 0 && n_activated_experts <= n_routed_experts, "n_activated_experts",
         "must be in [1, n_routed_experts], got ", n_activated_experts);
    need(n_expert_groups > 0 && n_routed_experts % n_expert_groups == 0, "n_expert_groups",
         "must be > 0 and divide n_routed_experts, got ", n_expert_groups);
    need(n_limited_groups > 0 && n_limited_groups <= n_expert_groups, "n_limited_groups",
         "must be in [1, n_expert_groups], got ", n_limited_groups);
    need(n_limited_groups * (n_routed_experts / n_expert_groups) >= n_activated_experts, "n_limited_groups",
         "must leave at least n_activated_experts experts, got ", n_limited_groups);
  }
  need(score_func == "softmax" || score_func == "sigmoid", "score_func", "must be \"softmax\" or \"sigmoid\", got \"",
       score_func, "\"");
  need(std::isfinite(route_scale), "route_scale", "must be finite");
  need(q_lora_rank > 0 && q_lora_rank % 128 == 0, "q_lora_rank",
       "must be a positive multiple of 128 (V3.2 has 1536; 0 is not supported), got ", q_lora_rank);
  need(kv_lora_rank == 512, "kv_lora_rank", "must be 512 (FlashMLA's V32 cache layout), got ", kv_lora_rank);
  need(qk_rope_head_dim == 64, "qk_rope_head_dim", "must be 64 (FlashMLA's V32 cache layout), got ", qk_rope_head_dim);
  need(qk_nope_head_dim > 0, "qk_nope_head_dim", "must be > 0, got ", qk_nope_head_dim);
  need(v_head_dim > 0, "v_head_dim", "must be > 0, got ", v_head_dim);
  need((n_heads * v_head_dim) % 128 == 0, "v_head_dim", "times n_heads must be a multiple of 128, got ",
       n_heads * v_head_dim);
  need(original_seq_len > 0, "original_seq_len", "must be > 0, got ", original_seq_len);
  need(rope_theta > 0, "rope_theta", "must be > 0, got ", rope_theta);
  need(rope_factor > 0, "rope_factor", "must be > 0, got ", rope_factor);
  need(std::isfinite(beta_fast) && std::isfinite(beta_slow), "beta_fast", "and beta_slow must be finite");
  need(std::isfinite(mscale), "mscale", "must be finite");
  need(max_seq_len > 0 && max_seq_len < (int64_t(1) << 31), "max_seq_len", "must be in [1, 2^31), got ", max_seq_len);
  need(max_batch_size > 0, "max_batch_size", "must be > 0, got ", max_batch_size);
  need(index_n_heads > 0 && index_n_heads <= 128, "index_n_heads", "must be in [1, 128] (MQA logits kernel), got ",
       index_n_heads);
  need(index_head_dim == 128, "index_head_dim", "must be 128, got ", index_head_dim);
  need(index_topk > 0 && index_topk <= 4096, "index_topk", "must be in [1, 4096] (DeepSelect's limit), got ",
       index_topk);
  need(dtype == "fp8" || dtype == "bf16", "dtype", "must be \"fp8\" or \"bf16\", got \"", dtype, "\"");
  need(scale_fmt.empty() || scale_fmt == "ue8m0", "scale_fmt", "must be null or \"ue8m0\", got \"", scale_fmt, "\"");
}

const char* component_name(Component c) {
  switch (c) {
    case Component::kEmbedding:
      return "embedding";
    case Component::kNorms:
      return "norms";
    case Component::kAttnProjections:
      return "attn_projections";
    case Component::kIndexer:
      return "indexer";
    case Component::kAttention:
      return "attention";
    case Component::kGate:
      return "gate";
    case Component::kExperts:
      return "experts";
    case Component::kShared:
      return "shared";
    case Component::kDenseMlp:
      return "dense_mlp";
    case Component::kHead:
      return "head";
    case Component::kCount:
      break;
  }
  return "?";
}

double StepTimes::total() const {
  double t = 0;
  for (double s : seconds) t += s;
  return t;
}

}  // namespace tessera::model
