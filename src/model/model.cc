// The step driver and the Model API (tessera/model.h): embedding, the layers (RMSNorm, MLA, RMSNorm,
// MLP or MoE, f32 residual), the head, and slot bookkeeping.
#include "tessera/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "linear.h"
#include "safetensors.h"
#include "step.h"
#include "tessera/core/error.h"

namespace tessera::model {

struct Model::Impl {
  TensorStore store;
  ModelState state;
  int64_t max_batch = 0, max_seq = 0;
  bool batch_invariant = false;
  StepTimes times;
  std::vector<float> residual, layer_in, layer_out;  // reused by every step (the step's h, x, y)

  Impl(const std::string& dir, const Config& config, const ModelOptions& opt)
      : store(dir),
        state{config,
              bind_weights(store, config),
              KvCache(config.n_layers, opt.max_batch_size > 0 ? opt.max_batch_size : config.max_batch_size,
                      opt.max_seq_len > 0 ? opt.max_seq_len : config.max_seq_len),
              {},
              0,
              nullptr,
              {}} {
    if (opt.lock_weights)
      store.lock();
    else if (opt.prefault_weights)
      store.prefault();
    state.exchange = opt.exchange;
    batch_invariant = opt.batch_invariant;
    max_batch = state.cache.slots();
    max_seq = opt.max_seq_len > 0 ? opt.max_seq_len : config.max_seq_len;
    state.rope = make_rope_table(config, max_seq);
    double scale = 1.0 / std::sqrt(double(config.qk_head_dim()));
    if (config.max_seq_len > config.original_seq_len) {
      const double mscale = 0.1 * config.mscale * std::log(config.rope_factor) + 1.0;
      scale *= mscale * mscale;
    }
    state.softmax_scale = scale;
  }

  void check_slot(const char* fn, int64_t slot) const {
    if (slot < 0 || slot >= max_batch)
      fail(ErrorCode::kInvalidArgument, "Model.", fn, ": slot ", slot, " is outside [0, max_batch_size = ", max_batch,
           ")");
  }

  // Runs one step; out rows: the last row of each sequence, or every row (all_rows).
  StepOutput run(const StepBatch& batch, const std::vector<int32_t>& tokens, bool all_rows, bool return_hidden) {
    const Config& c = state.config;
    if (state.exchange)
      TESSERA_CHECK(batch.rows() <= state.exchange->max_tokens(), "Model: a step of ", batch.rows(),
                    " tokens exceeds the expert exchange's max_tokens = ", state.exchange->max_tokens(),
                    " per rank (make_ep_exchange's max_tokens_per_rank)");
    const BatchInvariantScope invariant(batch_invariant);
    times = StepTimes{};
    StepTimer timer(times);
    const int64_t rows = batch.rows(), dim = c.dim;
    float* h = grown(residual, rows * dim);
    float* x = grown(layer_in, rows * dim);
    float* y = grown(layer_out, rows * dim);
    embed_tokens(state.weights.embed, c.vocab_size, dim, tokens.data(), rows, h);
    timer.lap(Component::kEmbedding);
    // From here on the caches change: the lengths follow.
    for (int64_t s = 0; s < batch.seqs(); ++s)
      state.cache.set_len(batch.slots[size_t(s)],
                          batch.first_pos[size_t(s)] + batch.row_begin[size_t(s) + 1] - batch.row_begin[size_t(s)]);
    StepOutput out;
    const int64_t out_rows = all_rows ? rows : batch.seqs(), K = c.index_topk;
    if (return_hidden) {
      out.hidden.resize(size_t(c.n_layers * out_rows * dim));
      out.topk.resize(size_t(c.n_layers * out_rows * K));
    }
    std::vector<int32_t> positions;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const LayerWeights& w = state.weights.layers[size_t(l)];
      rms_norm(h, w.attn_norm.data(), rows, dim, x);
      timer.lap(Component::kNorms);
      // An expert-parallel rank without tokens skips attention but joins every MoE exchange.
      if (rows > 0) mla_forward(state, l, batch, x, y, timer, return_hidden ? &positions : nullptr);
      for (int64_t i = 0; i < rows * dim; ++i) h[i] += y[i];
      rms_norm(h, w.ffn_norm.data(), rows, dim, x);
      timer.lap(Component::kNorms);
      if (w.moe) {
        moe_forward(state, l, x, rows, y, timer, batch.decode);
      } else {
        mlp_forward(w.dense, x, rows, y, c.ue8m0());
        timer.lap(Component::kDenseMlp);
      }
      for (int64_t i = 0; i < rows * dim; ++i) h[i] += y[i];
      if (return_hidden) {
        for (int64_t i = 0; i < out_rows; ++i) {
          const int64_t r = all_rows ? i : batch.row_begin[size_t(i) + 1] - 1;
          std::copy_n(h + r * dim, dim, out.hidden.data() + (l * out_rows + i) * dim);
          int32_t* sel = out.topk.data() + (l * out_rows + i) * K;
          std::copy_n(positions.data() + r * K, K, sel);
          std::sort(sel, sel + K, [](int32_t a, int32_t b) { return uint32_t(a) < uint32_t(b); });  // -1 last
        }
      }
      timer.lap(Component::kNorms);
    }
    out.rows = out_rows;
    std::vector<float> last(size_t(out.rows * dim));
    for (int64_t i = 0; i < out.rows; ++i) {
      const int64_t r = all_rows ? i : batch.row_begin[size_t(i) + 1] - 1;
      std::copy_n(h + r * dim, dim, last.data() + i * dim);
    }
    rms_norm(last.data(), state.weights.final_norm.data(), out.rows, dim, last.data());
    out.logits.resize(size_t(out.rows * c.vocab_size));
    if (out.rows > 0) matmul_bf16_f32(last.data(), out.rows, state.weights.head, c.vocab_size, dim, out.logits.data());
    timer.lap(Component::kHead);
    return out;
  }
};

namespace {

Config load_config(const std::string& dir, const ModelOptions& opt) {
  TESSERA_CHECK(opt.ranks >= 1, "Model: argument 'ranks' must be >= 1, got ", opt.ranks);
  if (opt.ranks > 1 && !opt.exchange)
    TESSERA_NOT_IMPLEMENTED(
        "Model: expert parallelism (ranks = ", opt.ranks, ") without an expert exchange; ",
        "C++ passes ModelOptions::exchange (tessera::model::make_ep_exchange, library tessera_ep), ",
        "the CLI runs `mpirun -np R tessera run`; the Python API runs one rank only");
  TESSERA_CHECK(!opt.exchange || opt.ranks == 1 || opt.ranks == opt.exchange->ranks(),
                "Model: argument 'ranks' = ", opt.ranks, " differs from the exchange's ",
                opt.exchange ? opt.exchange->ranks() : 0, " ranks");
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::exists(path))
    fail(ErrorCode::kInvalidArgument, "Model: checkpoint '", dir, "' has no config.json");
  Config c = Config::from_file(path);
  if (opt.exchange)
    TESSERA_CHECK(c.n_routed_experts % opt.exchange->ranks() == 0, "Model: n_routed_experts = ", c.n_routed_experts,
                  " must be a multiple of the expert-parallel ranks (", opt.exchange->ranks(), ")");
  TESSERA_CHECK(opt.max_batch_size >= 0, "Model: argument 'max_batch_size' must be >= 0, got ", opt.max_batch_size);
  TESSERA_CHECK(opt.max_seq_len >= 0 && opt.max_seq_len <= c.max_seq_len,
                "Model: argument 'max_seq_len' must be in [0, config max_seq_len = ", c.max_seq_len, "], got ",
                opt.max_seq_len);
  return c;
}

}  // namespace

Model::Model(const std::string& dir, const ModelOptions& opt)
    : impl_(std::make_unique<Impl>(dir, load_config(dir, opt), opt)) {}
Model::~Model() = default;

const Config& Model::config() const {
  return impl_->state.config;
}
int64_t Model::max_batch_size() const {
  return impl_->max_batch;
}
int64_t Model::max_seq_len() const {
  return impl_->max_seq;
}
const StepTimes& Model::last_step_times() const {
  return impl_->times;
}

int64_t Model::seq_len(int64_t slot) const {
  impl_->check_slot("seq_len", slot);
  return impl_->state.cache.len(slot);
}

void Model::reset(int64_t slot) {
  impl_->check_slot("reset", slot);
  impl_->state.cache.set_len(slot, 0);
}

void Model::reset_all() {
  for (int64_t s = 0; s < impl_->max_batch; ++s) impl_->state.cache.set_len(s, 0);
}

void Model::fill_synthetic_context(int64_t slot, int64_t len, uint64_t seed) {
  impl_->check_slot("fill_synthetic_context", slot);
  TESSERA_CHECK(len >= 0 && len <= impl_->max_seq, "Model.fill_synthetic_context: argument 'len' must be in [0, ",
                "max_seq_len = ", impl_->max_seq, "], got ", len);
  KvCache& cache = impl_->state.cache;
  for (int64_t l = 0; l < impl_->state.config.n_layers; ++l) cache.fill_random(l, slot, len, seed);
  cache.set_len(slot, len);
}

StepOutput Model::prefill(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                          bool all_tokens, bool return_hidden) {
  TESSERA_CHECK(slots.size() == tokens.size(),
                "Model.prefill: arguments 'seq_ids' and 'tokens' must have the same length, got ", slots.size(),
                " and ", tokens.size());
  TESSERA_CHECK(!slots.empty() || impl_->state.exchange,
                "Model.prefill: argument 'seq_ids' must not be empty (only an expert-parallel rank may run none)");
  StepBatch batch;
  std::vector<int32_t> flat;
  std::set<int64_t> seen;
  batch.row_begin.push_back(0);
  for (size_t i = 0; i < slots.size(); ++i) {
    impl_->check_slot("prefill", slots[i]);
    TESSERA_CHECK(seen.insert(slots[i]).second, "Model.prefill: slot ", slots[i], " appears twice in 'seq_ids'");
    TESSERA_CHECK(!tokens[i].empty(), "Model.prefill: tokens[", i, "] must not be empty");
    const int64_t start = impl_->state.cache.len(slots[i]);
    TESSERA_CHECK(start + int64_t(tokens[i].size()) <= impl_->max_seq, "Model.prefill: slot ", slots[i], " would hold ",
                  start + int64_t(tokens[i].size()), " tokens, more than max_seq_len = ", impl_->max_seq);
    batch.slots.push_back(slots[i]);
    batch.first_pos.push_back(start);
    for (size_t j = 0; j < tokens[i].size(); ++j) batch.pos.push_back(start + int64_t(j));
    flat.insert(flat.end(), tokens[i].begin(), tokens[i].end());
    batch.row_begin.push_back(int64_t(flat.size()));
  }
  return impl_->run(batch, flat, all_tokens, return_hidden);
}

StepOutput Model::decode(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens, bool return_hidden) {
  TESSERA_CHECK(slots.size() == tokens.size(),
                "Model.decode: arguments 'seq_ids' and 'tokens' must have the same length, got ", slots.size(), " and ",
                tokens.size());
  TESSERA_CHECK(!slots.empty() || impl_->state.exchange,
                "Model.decode: argument 'seq_ids' must not be empty (only an expert-parallel rank may run none)");
  StepBatch batch;
  batch.decode = true;
  std::set<int64_t> seen;
  batch.row_begin.push_back(0);
  for (size_t i = 0; i < slots.size(); ++i) {
    impl_->check_slot("decode", slots[i]);
    TESSERA_CHECK(seen.insert(slots[i]).second, "Model.decode: slot ", slots[i], " appears twice in 'seq_ids'");
    const int64_t start = impl_->state.cache.len(slots[i]);
    TESSERA_CHECK(start > 0, "Model.decode: slot ", slots[i], " is empty; prefill it first");
    TESSERA_CHECK(start + 1 <= impl_->max_seq, "Model.decode: slot ", slots[i],
                  " is full (max_seq_len = ", impl_->max_seq, ")");
    batch.slots.push_back(slots[i]);
    batch.first_pos.push_back(start);
    batch.pos.push_back(start);
    batch.row_begin.push_back(int64_t(i) + 1);
  }
  return impl_->run(batch, tokens, false, return_hidden);
}

std::vector<std::vector<int32_t>> Model::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                  int64_t max_new_tokens) {
  TESSERA_CHECK(int64_t(prompts.size()) <= impl_->max_batch, "Model.generate: ", prompts.size(),
                " prompts exceed max_batch_size = ", impl_->max_batch);
  TESSERA_CHECK(max_new_tokens >= 0, "Model.generate: argument 'max_new_tokens' must be >= 0, got ", max_new_tokens);
  std::vector<std::vector<int32_t>> out(prompts.size());
  // An expert-parallel rank without prompts still runs every step (they are collective).
  if ((prompts.empty() && !impl_->state.exchange) || max_new_tokens == 0) return out;
  std::vector<int64_t> slots(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    slots[i] = int64_t(i);
    TESSERA_CHECK(int64_t(prompts[i].size()) + max_new_tokens - 1 <= impl_->max_seq, "Model.generate: prompt ", i,
                  " plus max_new_tokens exceeds max_seq_len = ", impl_->max_seq);
    reset(int64_t(i));
  }
  StepOutput step = prefill(slots, prompts);
  for (int64_t n = 0;; ++n) {
    const std::vector<int32_t> next = argmax_rows(step.logits.data(), step.rows, config().vocab_size);
    for (size_t i = 0; i < prompts.size(); ++i) out[i].push_back(next[i]);
    if (n + 1 == max_new_tokens) break;
    step = decode(slots, next);
  }
  return out;
}

}  // namespace tessera::model
