// What one model step shares between its parts: the model (config, weights, caches, rotary table),
// the batch of tokens being run, and the component timer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "kv_cache.h"
#include "small_ops.h"
#include "weights.h"

namespace tessera::model {

// The larger buffers of a step's attention, kept from step to step and layer to layer: fresh vectors of
// a few hundred KB cost a zeroing pass and page faults each step (glibc returns them to the kernel in
// between). Each grows to the largest step seen; contents are stale on entry.
struct StepScratch {
  std::vector<float> qr, q, kv, o, index_q, index_k;
  std::vector<uint16_t> q_nope, q_mla, latent_rows, o_lat, kv_rows;
  std::vector<uint8_t> index_q_codes;
};
// v's storage for n elements (grown when smaller; never shrunk).
template <class T>
T* grown(std::vector<T>& v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
  return v.data();
}

struct ModelState {
  Config config;
  Weights weights;
  KvCache cache;
  RopeTable rope;
  double softmax_scale = 0;                  // MLA's, YaRN's mscale included
  std::shared_ptr<ExpertExchange> exchange;  // expert parallelism; null: this rank runs every expert
  StepScratch scratch;
};

// The tokens of one step, flattened: sequence i (cache slot slots[i]) owns rows
// [row_begin[i], row_begin[i+1]), at consecutive positions starting at first_pos[i].
// decode: one row per sequence, run over the paged kernels; otherwise each sequence is run as a prefill.
struct StepBatch {
  std::vector<int64_t> slots, row_begin, first_pos;
  std::vector<int64_t> pos;  // per row
  bool decode = false;
  int64_t rows() const { return row_begin.empty() ? 0 : row_begin.back(); }
  int64_t seqs() const { return int64_t(slots.size()); }
};

// Adds the time since the previous lap to a component: one steady_clock read per boundary.
class StepTimer {
 public:
  explicit StepTimer(StepTimes& times) : times_(times), last_(std::chrono::steady_clock::now()) {}
  void lap(Component c) {
    const auto now = std::chrono::steady_clock::now();
    times_.seconds[int(c)] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  void count_routed_experts(int64_t n) { times_.routed_experts_run += n; }

 private:
  StepTimes& times_;
  std::chrono::steady_clock::time_point last_;
};

class LinearInput;

// The indexer (indexer.cc): writes the batch's keys into the layer's index cache and returns the
// selected positions, [rows, index_topk] int32, -1 past the first min(index_topk, pos + 1). Reads the
// normalised input x_norm and MLA's query latent qr (RMSNorm(q_a(x))).
std::vector<int32_t> indexer_forward(ModelState& m, int64_t layer, const StepBatch& batch, LinearInput& x_norm,
                                     LinearInput& qr, StepTimer& timer);

// MLA with sparse attention (mla.cc): out [rows, dim] from the normalised input x_norm [rows, dim].
// positions_out (optional) receives the indexer's selection, [rows, index_topk].
void mla_forward(ModelState& m, int64_t layer, const StepBatch& batch, const float* x_norm, float* out,
                 StepTimer& timer, std::vector<int32_t>* positions_out = nullptr);

// Dense MLP down(silu(gate(x)) * up(x)) (moe.cc): out [rows, dim].
void mlp_forward(const Mlp& mlp, const float* x, int64_t rows, float* out, bool ue8m0);

// MoE (moe.cc): out [rows, dim] = routed experts + shared experts; rows may be 0 (an expert-parallel
// rank without tokens still joins the exchange). decode picks the masked grouped GEMM, else the
// contiguous one.
void moe_forward(ModelState& m, int64_t layer, const float* x_norm, int64_t rows, float* out, StepTimer& timer,
                 bool decode);

}  // namespace tessera::model
