// Multi-head latent attention with absorbed queries over FlashMLA's V32 FP8 cache (docs/model.md "MLA"):
// projections on tessera's GEMMs, the latent cache written by flash_mla::quantize_k_cache, sparse
// attention over the indexer's positions by flash_mla_with_kvcache (decode) or flash_mla_sparse_fwd over
// the dequantised cache rows (prefill), so both read the same quantised latent.
#include <algorithm>
#include <cmath>

#include "linear.h"
#include "step.h"
#include "tessera/core/dtype.h"
#include "tessera/flash_mla.h"
#include "tessera/gemm_grouped.h"

namespace tessera::model {

void mla_forward(ModelState& m, int64_t layer, const StepBatch& batch, const float* x_norm, float* out,
                 StepTimer& timer, std::vector<int32_t>* positions_out) {
  const Config& c = m.config;
  const LayerWeights& w = m.weights.layers[size_t(layer)];
  const int64_t rows = batch.rows(), H = c.n_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim;
  const int64_t dqk = c.qk_head_dim(), vdim = c.v_head_dim, lat = c.kv_lora_rank, dc = KvCache::kLatentDim;
  const bool ue8m0 = c.ue8m0();

  // q = q_b(RMSNorm(q_a(x))); kv = kv_a(x). x_norm and qr are quantised once for all their linears
  // (the indexer's included).
  StepScratch& sc = m.scratch;
  float* qr = grown(sc.qr, rows * c.q_lora_rank);
  float* q = grown(sc.q, rows * H * dqk);
  float* kv = grown(sc.kv, rows * dc);
  LinearInput x_in(x_norm, rows, c.dim, ue8m0);
  x_in.forward(w.q_a, qr);
  rms_norm(qr, w.q_a_norm.data(), rows, c.q_lora_rank, qr);
  LinearInput qr_in(qr, rows, c.q_lora_rank, ue8m0);
  qr_in.forward(w.q_b, q);
  x_in.forward(w.kv_a, kv);
  // Absorbed queries in bf16: [q_nope W_uk (512), rotated q_pe (64)] per head, q_nope W_uk on the bf16
  // einsum with W_uk in bf16 (DeepSeek's weight_dequant; stored transposed, weights.h), written straight
  // into the query rows.
  const int64_t kvb_head = (nope + vdim) * lat;  // elements of one head's block of kv_b
  // The absorbed products run over gemm_rows(rows) rows (batch invariance, linear.h); rows past `rows` are zero.
  const int64_t grows = gemm_rows(rows);
  uint16_t* q_nope = grown(sc.q_nope, grows * H * nope);
  uint16_t* q_mla = grown(sc.q_mla, grows * H * dc);
  std::fill(q_nope + rows * H * nope, q_nope + grows * H * nope, uint16_t(0));
  std::fill(q_mla + rows * H * dc, q_mla + grows * H * dc, uint16_t(0));
  for_rows(rows * H, dqk, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* qh = q + i * dqk;
      rope_interleaved(qh + nope, m.rope, batch.pos[size_t(i / H)]);
      f32_to_bf16_row(qh, nope, q_nope + i * nope);
      f32_to_bf16_row(qh + nope, rope, q_mla + i * dc + lat);
    }
  });
  gemm::einsum(
      "bhr,hdr->bhd", TensorView(q_nope, DType::kBF16, {grows, H, nope}),
      TensorView(const_cast<uint16_t*>(w.kv_b_absorbed.data()), DType::kBF16, {H, lat, nope}, {kvb_head, nope, 1}),
      TensorView(q_mla, DType::kBF16, {grows, H, lat}, {H * dc, dc, 1}), nullptr, gemm::EinsumOrder::kFastest);
  timer.lap(Component::kAttnProjections);

  // The indexer reads qr and x_norm and writes its own key cache.
  const std::vector<int32_t> positions = indexer_forward(m, layer, batch, x_in, qr_in, timer);

  // Latent rows: RMSNorm(kv[:512]) and rotated k_pe, rounded to bf16, quantised into the cache.
  uint16_t* latent_rows = grown(sc.latent_rows, rows * dc);
  rms_norm_strided(kv, dc, w.kv_a_norm.data(), rows, lat, kv);
  for_rows(rows, dc, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* kr = kv + r * dc;
      rope_interleaved(kr + lat, m.rope, batch.pos[size_t(r)]);
      f32_to_bf16_row(kr, dc, latent_rows + r * dc);
    }
  });
  for (int64_t s = 0; s < batch.seqs(); ++s) {
    const int64_t r0 = batch.row_begin[size_t(s)], r1 = batch.row_begin[size_t(s) + 1];
    m.cache.write_latent(layer, batch.slots[size_t(s)], batch.first_pos[size_t(s)], r1 - r0, latent_rows + r0 * dc);
  }

  const int64_t K = c.index_topk;
  // The kernels write every row of o_lat they are given; the padding rows must read as zero.
  uint16_t* o_lat = grown(sc.o_lat, grows * H * lat);
  std::fill(o_lat + rows * H * lat, o_lat + grows * H * lat, uint16_t(0));
  if (batch.decode) {
    std::vector<int32_t> slots(positions.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < K; ++j) {
        const int32_t p = positions[size_t(r * K + j)];
        slots[size_t(r * K + j)] = p < 0 ? -1 : m.cache.flat_slot(batch.slots[size_t(r)], p);
      }
    const TensorView indices(slots.data(), DType::kI32, {rows, 1, K});
    flash_mla::KvcacheInputs in;
    in.q = TensorView(q_mla, DType::kBF16, {rows, 1, H, dc});
    in.k_cache = m.cache.latent_view(layer);
    in.is_fp8_kvcache = true;
    in.indices = &indices;
    in.head_dim_v = lat;
    in.softmax_scale = m.softmax_scale;
    std::vector<float> lse(size_t(rows * H));
    flash_mla::SchedMeta meta;
    flash_mla::flash_mla_with_kvcache(in, meta, TensorView(o_lat, DType::kBF16, {rows, 1, H, lat}),
                                      TensorView(lse.data(), DType::kF32, {rows, H, 1}));
  } else {
    for (int64_t s = 0; s < batch.seqs(); ++s) {
      const int64_t r0 = batch.row_begin[size_t(s)], r1 = batch.row_begin[size_t(s) + 1], n = r1 - r0;
      const int64_t len = batch.pos[size_t(r1 - 1)] + 1;  // every selected position is below len
      uint16_t* kv_rows = grown(sc.kv_rows, len * dc);
      m.cache.read_latent(layer, batch.slots[size_t(s)], len, kv_rows);
      flash_mla::SparsePrefillInputs in;
      in.q = TensorView(q_mla + r0 * H * dc, DType::kBF16, {n, H, dc});
      in.kv = TensorView(kv_rows, DType::kBF16, {len, 1, dc});
      in.indices = TensorView(const_cast<int32_t*>(positions.data()) + r0 * K, DType::kI32, {n, 1, K});
      in.sm_scale = m.softmax_scale;
      in.d_v = lat;
      std::vector<float> max_logits(size_t(n * H)), lse(size_t(n * H));
      flash_mla::flash_mla_sparse_fwd(in, TensorView(o_lat + r0 * H * lat, DType::kBF16, {n, H, lat}),
                                      TensorView(max_logits.data(), DType::kF32, {n, H}),
                                      TensorView(lse.data(), DType::kF32, {n, H}));
    }
  }
  timer.lap(Component::kAttention);

  // o[h] = o_lat[h] W_uv[h]^T on the bf16 einsum, then o_proj.
  float* o = grown(sc.o, grows * H * vdim);  // every row written by the einsum
  gemm::einsum("bhr,hdr->bhd", TensorView(o_lat, DType::kBF16, {grows, H, lat}),
               TensorView(const_cast<uint16_t*>(w.kv_b_absorbed.data()) + nope * lat, DType::kBF16, {H, vdim, lat},
                          {kvb_head, lat, 1}),
               TensorView(o, DType::kF32, {grows, H, vdim}), nullptr, gemm::EinsumOrder::kFastest);
  linear_forward(w.o_proj, o, rows, out, ue8m0);
  if (positions_out) *positions_out = positions;
  timer.lap(Component::kAttnProjections);
}

}  // namespace tessera::model
