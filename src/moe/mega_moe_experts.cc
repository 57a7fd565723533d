#include "moe/mega_moe_experts.h"

#include <cstring>
#include <vector>

#include "moe/mega_moe_activation.h"

namespace tessera::mega_moe::detail {
namespace {

// The i-th [N, K] matrix of a [G, N, K] view.
TensorView expert_slice(const TensorView& t, int64_t i) {
  TensorView v;
  v.dtype = t.dtype;
  v.ndim = t.ndim - 1;
  for (int d = 1; d < t.ndim; ++d) {
    v.shape[d - 1] = t.shape[d];
    v.strides[d - 1] = t.strides[d];
  }
  v.data = static_cast<char*>(t.data) + i * t.strides[0] * dtype_storage_bytes(t.dtype);
  return v;
}

gemm::ScaledTensor expert_slice(const gemm::ScaledTensor& t, int64_t i) {
  return {expert_slice(t.data, i), t.scale.data ? expert_slice(t.scale, i) : TensorView()};
}

gemm::Recipe per_32_recipe() {
  gemm::Recipe r;
  r.recipe = std::array<int, 3>{1, 1, 32};
  return r;
}

}  // namespace

void run_expert_block(const SymmBuffer& buffer, const ExpertWeights& weights, const BlockJob& job,
                      std::optional<float> clamp) {
  const BufferShape& s = buffer.shape();
  const BufferLayout& l = buffer.layout();
  const bool fp8 = s.mma_type == MmaType::kFp8xFp4;
  const int64_t m = job.num_slots, h = s.hidden, inter = s.intermediate_hidden, topk = s.num_topk;
  const int64_t x_row_bytes = h * (fp8 ? 1 : 2), x_sf_ints = fp8 ? h / 128 : 0;
  const int64_t act_sf_ints = fp8 ? inter / 128 : 0;

  // Gather the block's activations, their scales and the slots' top-k weights.
  std::vector<uint8_t> x(static_cast<size_t>(m * x_row_bytes));
  std::vector<int32_t> x_sf(static_cast<size_t>(m * x_sf_ints));
  std::vector<float> topk_weight(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    const Slot& slot = job.slots[i];
    const char* src = buffer.rank_data(slot.rank);
    std::memcpy(x.data() + i * x_row_bytes, src + l.x + slot.token * x_row_bytes, size_t(x_row_bytes));
    if (fp8) std::memcpy(x_sf.data() + i * x_sf_ints, src + l.x_sf + slot.token * x_sf_ints * 4, size_t(x_sf_ints * 4));
    topk_weight[size_t(i)] = reinterpret_cast<const float*>(src + l.topk_weights)[slot.token * topk + slot.k];
  }

  // GEMM 1: [m, hidden] x [2 I, hidden]^T -> bf16 [m, 2 I].
  std::vector<uint16_t> gate_up(static_cast<size_t>(m * 2 * inter));
  const TensorView gate_up_view(gate_up.data(), DType::kBF16, {m, 2 * inter});
  const gemm::ScaledTensor w1 = expert_slice(weights.l1, job.expert);
  const gemm::ScaledTensor w2 = expert_slice(weights.l2, job.expert);
  if (fp8) {
    const gemm::ScaledTensor a{TensorView(x.data(), DType::kF8E4M3, {m, h}),
                               TensorView(x_sf.data(), DType::kI32, {m, x_sf_ints})};
    gemm::fp8_fp4_gemm_nt(a, w1, gate_up_view, nullptr, per_32_recipe());
  } else {
    gemm::bf16_gemm_nt(TensorView(x.data(), DType::kBF16, {m, h}), w1.data, gate_up_view);
  }

  // Activation (and FP8 re-quantisation) per token row.
  std::vector<float> act(static_cast<size_t>(inter));
  std::vector<uint8_t> act_q(static_cast<size_t>(m * inter * (fp8 ? 1 : 2)));
  std::vector<int32_t> act_sf(static_cast<size_t>(m * act_sf_ints));
  for (int64_t i = 0; i < m; ++i) {
    swiglu_row(gate_up.data() + i * 2 * inter, inter, topk_weight[size_t(i)], clamp, act.data());
    if (fp8)
      quantize_row_e4m3_ue8m0(act.data(), inter, act_q.data() + i * inter,
                              reinterpret_cast<uint8_t*>(act_sf.data() + i * act_sf_ints));
    else
      round_row_bf16(act.data(), inter, reinterpret_cast<uint16_t*>(act_q.data()) + i * inter);
  }

  // GEMM 2: [m, I] x [hidden, I]^T -> bf16 [m, hidden], each row sent to its (rank, token, slot).
  std::vector<uint16_t> out(static_cast<size_t>(m * h));
  const TensorView out_view(out.data(), DType::kBF16, {m, h});
  if (fp8) {
    const gemm::ScaledTensor a{TensorView(act_q.data(), DType::kF8E4M3, {m, inter}),
                               TensorView(act_sf.data(), DType::kI32, {m, act_sf_ints})};
    gemm::fp8_fp4_gemm_nt(a, w2, out_view, nullptr, per_32_recipe());
  } else {
    gemm::bf16_gemm_nt(TensorView(act_q.data(), DType::kBF16, {m, inter}), w2.data, out_view);
  }
  for (int64_t i = 0; i < m; ++i) {
    const Slot& slot = job.slots[i];
    char* dst = buffer.rank_data(slot.rank) + l.combine + (int64_t(slot.token) * topk + slot.k) * h * 2;
    std::memcpy(dst, out.data() + i * h, size_t(h * 2));
  }
}

}  // namespace tessera::mega_moe::detail
