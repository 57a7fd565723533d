// tessera/model.h - a DeepSeek-V3.2 model (MLA + sparse-attention indexer + MoE, FP8 block-scaled
// weights) run on tessera's own kernels. The config keys, checkpoint layout and numerics are those of
// docs/model.md.
//
// A Model holds the memory-mapped checkpoint and, for each of max_batch_size sequence slots, the paged
// caches of every layer (FlashMLA's V32 FP8 latent cache and the indexer's FP8 key cache). prefill()
// appends prompt tokens to slots, decode() appends one token to each given slot; both return f32 logits.
// Results are bitwise identical for every thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::model {

// The model's config (docs/model.md "Config"); defaults are DeepSeek's ModelArgs defaults.
struct Config {
  int64_t vocab_size = 102400, dim = 2048, inter_dim = 10944, moe_inter_dim = 1408;
  int64_t n_layers = 27, n_dense_layers = 1, n_heads = 16;
  int64_t n_routed_experts = 64, n_shared_experts = 2, n_activated_experts = 6;
  int64_t n_expert_groups = 1, n_limited_groups = 1;
  std::string score_func = "softmax";
  double route_scale = 1.0;
  int64_t q_lora_rank = 0, kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128, qk_rope_head_dim = 64, v_head_dim = 128;
  int64_t original_seq_len = 4096;
  double rope_theta = 10000, rope_factor = 40, beta_fast = 32, beta_slow = 1, mscale = 1.0;
  int64_t max_seq_len = 16384, max_batch_size = 8;
  int64_t index_n_heads = 64, index_head_dim = 128, index_topk = 2048;
  std::string dtype = "bf16";  // "fp8" | "bf16": the format of the linear weights
  std::string scale_fmt;       // "" (null) | "ue8m0"

  // Parses a JSON object; unknown keys, wrong types and values tessera's kernels cannot run are errors
  // naming the key (Error kInvalidArgument). `what` names the source in messages.
  static Config from_json(const std::string& text, const std::string& what = "config");
  static Config from_file(const std::string& path);
  void validate(const std::string& what = "config") const;

  bool fp8() const { return dtype == "fp8"; }
  bool ue8m0() const { return scale_fmt == "ue8m0"; }
  bool is_moe_layer(int64_t layer) const { return layer >= n_dense_layers; }
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// Wall time of one step by component (seconds), collected with one steady_clock read per boundary.
enum class Component : int {
  kEmbedding,
  kNorms,
  kAttnProjections,  // q_a, q_b, kv_a, the absorbed W_uk / W_uv products and o_proj
  kIndexer,          // indexer projections, key cache writes, logits and top-k
  kAttention,        // latent cache writes and FlashMLA attention
  kGate,
  kExperts,   // routed experts
  kShared,    // shared experts
  kDenseMlp,  // the dense layers' MLP
  kHead,      // final norm, logits and argmax
  kCount
};
const char* component_name(Component c);
struct StepTimes {
  double seconds[int(Component::kCount)] = {};
  int64_t routed_experts_run = 0;  // (layer, routed expert) pairs that had rows in the step
  double total() const;
};

struct ModelOptions {
  int64_t max_batch_size = 0;  // sequence slots; 0 = the config's max_batch_size
  int64_t max_seq_len = 0;     // cache capacity per slot; 0 = the config's max_seq_len (must not exceed it)
  int ranks = 1;               // expert parallelism; > 1 is not implemented yet
  // Map every page of the checkpoint into the process at load (reads it all when it is not in the page
  // cache): steps then take no page faults on weights they touch for the first time (routed experts).
  // For checkpoints that fit in memory; the load takes longer.
  bool prefault_weights = false;
};

// What a step returns. logits: [rows, vocab_size] f32. hidden (when asked for): the f32 residual stream
// after every layer, [n_layers, rows, dim], and topk: the positions each layer's indexer selected,
// [n_layers, rows, index_topk] int32 (ascending, then -1 past the min(index_topk, pos + 1) selected). Rows: prefill
// gives one row per sequence (its last token), or one per token with all_tokens; decode gives one row per sequence.
struct StepOutput {
  int64_t rows = 0;
  std::vector<float> logits;
  std::vector<float> hidden;
  std::vector<int32_t> topk;
};

class Model {
 public:
  // checkpoint_dir holds config.json and *.safetensors (docs/model.md "Checkpoint").
  explicit Model(const std::string& checkpoint_dir, const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Config& config() const;
  int64_t max_batch_size() const;
  int64_t max_seq_len() const;
  // Tokens cached in a slot so far.
  int64_t seq_len(int64_t slot) const;
  // Empties a slot (its cache is reused by the next prefill); reset_all() empties every slot.
  void reset(int64_t slot);
  void reset_all();
  // For benchmarks: makes slot hold `len` tokens of random cache content (valid FP8 latents and indexer
  // keys, as a prefill writes them) without running the model, so that decode steps at a long context
  // can be timed without its prefill. Content is a function of (seed, slot, layer, position).
  void fill_synthetic_context(int64_t slot, int64_t len, uint64_t seed = 0);

  // Appends tokens[i] to slot slots[i] (distinct slots, each token list non-empty) and runs them.
  StepOutput prefill(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                     bool all_tokens = false, bool return_hidden = false);
  // Appends one token to each slot and runs them as one batch over the paged caches.
  StepOutput decode(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens, bool return_hidden = false);
  // Greedy generation: empties slots 0..prompts.size()-1, prefills the prompts, then decodes
  // max_new_tokens tokens per prompt (argmax, lowest index on ties). Returns the new tokens.
  std::vector<std::vector<int32_t>> generate(const std::vector<std::vector<int32_t>>& prompts, int64_t max_new_tokens);

  // The component times of the last prefill or decode call.
  const StepTimes& last_step_times() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Index of the largest value (lowest index on ties; NaN never wins) of each row of logits [rows, n].
std::vector<int32_t> argmax_rows(const float* logits, int64_t rows, int64_t n);

}  // namespace tessera::model
