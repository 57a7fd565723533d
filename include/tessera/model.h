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
#include <functional>
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

// Expert parallelism (docs/model.md "Expert parallelism"): R ranks each run attention, dense layers,
// shared experts, gate and head for their own sequences and the routed experts [r*E/R, (r+1)*E/R) for
// every rank's tokens. An ExpertExchange moves each MoE layer's routed tokens to the experts' ranks and
// the weighted expert outputs back. tessera_ep implements it over ElasticBuffer (tessera/model_ep.h);
// the Model only sees this interface, so libtessera needs no MPI.

// This rank's tokens of one MoE layer. FP8 weights: the rows as the runner quantises them (e4m3 codes
// and one f32 scale per 128 values); bf16 weights: the rows rounded to bf16.
struct RoutedTokens {
  int64_t rows = 0, dim = 0, topk = 0, num_experts = 0;
  const uint8_t* codes = nullptr;    // fp8: [rows, dim]
  const float* scales = nullptr;     // fp8: [rows, dim / 128]
  const uint16_t* bf16 = nullptr;    // bf16: [rows, dim]
  const int32_t* experts = nullptr;  // [rows, topk] global expert index
  const float* weights = nullptr;    // [rows, topk] routing weights
};

// The rows this rank's experts run, grouped by local expert: rows [begin[e], begin[e+1]) go to global
// expert first_expert + e. The runner writes out[row] = bf16(weights[row] * expert(row)).
struct ExpertRows {
  int64_t rows = 0, dim = 0, first_expert = 0;
  std::vector<int64_t> begin;      // [local experts + 1]
  const uint8_t* codes = nullptr;  // fp8: [rows, dim]
  const float* scales = nullptr;   // fp8: [rows, dim / 128]
  const uint16_t* bf16 = nullptr;  // bf16: [rows, dim]
  const float* weights = nullptr;  // [rows]
  uint16_t* out = nullptr;         // [rows, dim] bf16
};

class ExpertExchange {
 public:
  using LocalExperts = std::function<void(ExpertRows&)>;
  virtual ~ExpertExchange() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // The most tokens one exchange() of this rank may carry.
  virtual int64_t max_tokens() const = 0;
  // Collective (every rank, in the same order, any rows >= 0): sends every (token, top-k lane) to its
  // expert's rank, runs run_local on the rows this rank received and writes out[t] (bf16 [rows, dim]) =
  // the f32 sum of token t's lane outputs in top-k lane order, rounded once to bf16. A failed peer is
  // Error(kRuntime) naming its rank.
  virtual void exchange(const RoutedTokens& tokens, const LocalExperts& run_local, uint16_t* out) = 0;
};

struct ModelOptions {
  int64_t max_batch_size = 0;  // sequence slots; 0 = the config's max_batch_size
  int64_t max_seq_len = 0;     // cache capacity per slot; 0 = the config's max_seq_len (must not exceed it)
  int ranks = 1;               // expert-parallel ranks: 1, or exchange->ranks()
  std::shared_ptr<ExpertExchange> exchange;  // required when ranks > 1
  // Every GEMM row computed as in a batch of >= 9 rows (zero rows appended where fewer), so a sequence's
  // bits do not depend on the rest of its batch: what makes 1 and R expert-parallel ranks, which batch
  // the sequences differently, bitwise identical. Costs the decode GEMVs of small batches.
  bool batch_invariant = false;
  // Map every page of the checkpoint into the process at load (reads it all when it is not in the page
  // cache) and read one byte of each page: steps then take no page faults, and pay no hypervisor's
  // first-touch cost, on weights they touch for the first time (routed experts). For checkpoints that
  // fit in memory; the load takes longer.
  bool prefault_weights = false;
  // Lock every page of the checkpoint in memory at load (mlock; implies prefault_weights): the kernel
  // may then not page weights out between steps, as memory reclaim does with file pages no recent step
  // touched (for example Linux's DAMON with a pageout scheme). Needs the locked-memory limit
  // (ulimit -l) above the checkpoint's size or CAP_IPC_LOCK; the load throws kRuntime otherwise.
  bool lock_weights = false;
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
  // With ranks > 1, prefill and decode are collective (every rank calls them in the same order) and
  // slots may be empty: the rank then joins each MoE layer's exchange with no tokens.
  StepOutput prefill(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                     bool all_tokens = false, bool return_hidden = false);
  // Appends one token to each slot and runs them as one batch over the paged caches.
  StepOutput decode(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens, bool return_hidden = false);
  // Greedy generation: empties slots 0..prompts.size()-1, prefills the prompts, then decodes
  // max_new_tokens tokens per prompt (argmax, lowest index on ties). Returns the new tokens. With ranks
  // > 1 every rank calls it with its own prompts (possibly none) and the same max_new_tokens.
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
