// DeepSeek sparse attention's lightning indexer (docs/model.md "Indexer"): FP8 queries and keys after
// rotary and Hadamard, logits by DeepGEMM's MQA logits kernels (the contiguous form for prefill, the
// paged form over the key cache for decode), then DeepSelect's top-k.
#include <algorithm>
#include <cmath>

#include "linear.h"
#include "step.h"
#include "tessera/core/thread_pool.h"
#include "tessera/mqa_logits.h"
#include "tessera/select.h"

namespace tessera::model {
namespace {

constexpr int64_t kPrefillChunk = 256;  // query rows per logits buffer: bounds it to 256 x context floats

void select_topk(const float* logits, int64_t rows, int64_t width, int64_t topk, int32_t* ends, int32_t* out) {
  select::TopkOptions opt;
  opt.idx_oob_fill_value = -1;
  const TensorView end(ends, DType::kI32, {rows});
  select::topk(TensorView(const_cast<float*>(logits), DType::kF32, {rows, width}), int(topk), nullptr, &end, nullptr,
               TensorView(out, DType::kI32, {rows, topk}), nullptr, opt);
}

}  // namespace

std::vector<int32_t> indexer_forward(ModelState& m, int64_t layer, const StepBatch& batch, LinearInput& x_norm,
                                     LinearInput& qr, StepTimer& timer) {
  const Config& c = m.config;
  const LayerWeights& w = m.weights.layers[size_t(layer)];
  const int64_t rows = batch.rows(), H = c.index_n_heads, D = c.index_head_dim, K = c.index_topk;
  const bool ue8m0 = c.ue8m0();

  // Queries: rotary (halves) on each head's first 64, Hadamard, q8 with one scale per head.
  StepScratch& sc = m.scratch;
  float* q = grown(sc.index_q, rows * H * D);
  qr.forward(w.index_wq_b, q);
  uint8_t* q_codes = grown(sc.index_q_codes, rows * H * D);
  std::vector<float> q_scales(size_t(rows * H));
  parallel_for(rows * H, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* qh = q + i * D;
      rope_halves(qh, m.rope, batch.pos[size_t(i / H)]);
      hadamard128(qh);
      q8_row(qh, D, ue8m0, q_codes + i * D, &q_scales[size_t(i)]);
    }
  });
  // Keys: LayerNorm, rotary, Hadamard, q8 with one scale per token, into the cache.
  float* k = grown(sc.index_k, rows * D);
  x_norm.forward(w.index_wk, k);
  layer_norm(k, w.index_k_norm_w.data(), w.index_k_norm_b.data(), rows, D, k);
  for (int64_t s = 0; s < batch.seqs(); ++s)
    for (int64_t r = batch.row_begin[size_t(s)]; r < batch.row_begin[size_t(s) + 1]; ++r) {
      float* kr = k + r * D;
      rope_halves(kr, m.rope, batch.pos[size_t(r)]);
      hadamard128(kr);
      uint8_t codes[128];
      float scale;
      q8_row(kr, D, ue8m0, codes, &scale);
      m.cache.write_index_key(layer, batch.slots[size_t(s)], batch.pos[size_t(r)], codes, scale);
    }
  // Head weights with the query scales folded in (relu commutes with a positive scale).
  std::vector<float> weights(size_t(rows * H));
  matmul_bf16_f32(x_norm.data(), rows, w.index_weights_proj, H, c.dim, weights.data());
  const float head_scale = float(1.0 / std::sqrt(double(H)) / std::sqrt(double(D)));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = weights[i] * head_scale * q_scales[i];

  std::vector<int32_t> topk(size_t(rows * K));
  if (batch.decode) {
    const int64_t B = rows;
    std::vector<int32_t> lens(static_cast<size_t>(B)), table(size_t(B * m.cache.max_blocks()));
    int64_t max_len = 0;
    for (int64_t b = 0; b < B; ++b) {
      lens[size_t(b)] = int32_t(batch.pos[size_t(b)] + 1);
      max_len = std::max<int64_t>(max_len, lens[size_t(b)]);
      std::copy_n(m.cache.block_row(batch.slots[size_t(b)]), m.cache.max_blocks(),
                  table.begin() + b * m.cache.max_blocks());
    }
    const TensorView lens_view(lens.data(), DType::kI32, {B});
    const int sms = num_threads();
    std::vector<int32_t> schedule(size_t(2 * (sms + 1)));
    const TensorView sched(schedule.data(), DType::kI32, {sms + 1, 2});
    attention::get_paged_mqa_logits_metadata(lens_view, int(KvCache::kBlock), sms, sched);
    std::vector<float> logits(size_t(B * max_len));
    attention::fp8_fp4_paged_mqa_logits(TensorView(q_codes, DType::kF8E4M3, {B, 1, H, D}), nullptr,
                                        m.cache.index_view(layer), TensorView(weights.data(), DType::kF32, {B, H}),
                                        lens_view, TensorView(table.data(), DType::kI32, {B, m.cache.max_blocks()}),
                                        sched, TensorView(logits.data(), DType::kF32, {B, max_len}), max_len, true);
    select_topk(logits.data(), B, max_len, K, lens.data(), topk.data());
  } else {
    for (int64_t s = 0; s < batch.seqs(); ++s) {
      const int64_t r0 = batch.row_begin[size_t(s)], r1 = batch.row_begin[size_t(s) + 1];
      const int64_t len = batch.pos[size_t(r1 - 1)] + 1;
      std::vector<uint8_t> keys(size_t(len * D));
      std::vector<float> key_scales(static_cast<size_t>(len));
      m.cache.read_index_keys(layer, batch.slots[size_t(s)], len, keys.data(), key_scales.data());
      for (int64_t c0 = r0; c0 < r1; c0 += kPrefillChunk) {
        const int64_t n = std::min(kPrefillChunk, r1 - c0);
        std::vector<int32_t> ks(static_cast<size_t>(n), 0), ke(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) ke[size_t(i)] = int32_t(batch.pos[size_t(c0 + i)] + 1);
        std::vector<float> logits(size_t(n * len));
        attention::fp8_fp4_mqa_logits(
            TensorView(q_codes + c0 * H * D, DType::kF8E4M3, {n, H, D}), nullptr,
            TensorView(keys.data(), DType::kF8E4M3, {len, D}), TensorView(key_scales.data(), DType::kF32, {len}),
            TensorView(weights.data() + c0 * H, DType::kF32, {n, H}), TensorView(ks.data(), DType::kI32, {n}),
            TensorView(ke.data(), DType::kI32, {n}), TensorView(logits.data(), DType::kF32, {n, len}), true, 0);
        select_topk(logits.data(), n, len, K, ke.data(), topk.data() + c0 * K);
      }
    }
  }
  timer.lap(Component::kIndexer);
  return topk;
}

}  // namespace tessera::model
