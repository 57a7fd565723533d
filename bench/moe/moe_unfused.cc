#include "moe/moe_unfused.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/ep_kernels.h"
#include "backends/cpu/registry.h"
#include "tessera/core/dtype.h"
#include "tessera/core/thread_pool.h"
#include "tessera/gemm_grouped.h"

namespace tessera::bench {
namespace {

// silu(gate) * up * weight per value, then e4m3 with one UE8M0 scale per 32 (DeepGEMM's recipe).
void swiglu_fp8_row(const uint16_t* gate_up, int64_t n, float weight, uint8_t* q, uint8_t* exps) {
  float v[32];
  for (int64_t g = 0; g < n / 32; ++g) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) {
      const float gate = bf16_to_f32(gate_up[g * 32 + i]), up = bf16_to_f32(gate_up[n + g * 32 + i]);
      v[i] = (gate / (1.0f + std::exp(-gate)) * up) * weight;
      amax = std::max(amax, std::fabs(v[i]));
    }
    const uint32_t bits = f32_bits(amax * (1.0f / 448.0f));
    const uint32_t e = std::min<uint32_t>((bits >> 23) + ((bits & 0x7FFFFFu) != 0), 254u);
    const float inv = f32_from_bits((254u - e) << 23);
    exps[g] = uint8_t(e);
    for (int i = 0; i < 32; ++i) q[g * 32 + i] = f32_to_e4m3_sat(v[i] * inv);
  }
}

}  // namespace

UnfusedMoe::UnfusedMoe(const MoeInputs& in) : in_(in) {
  const int64_t slots = in.tokens * in.topk;
  row_of_slot_.assign(size_t(slots), -1);
  for (int64_t e = 0; e < in.experts; ++e) {
    for (int64_t s = 0; s < slots; ++s)
      if (in.topk_idx[s] == e) {
        row_of_slot_[size_t(s)] = int64_t(src_slot_.size());
        src_slot_.push_back(s);
      }
    ends_.push_back(int32_t(src_slot_.size()));
  }
  rows_ = int64_t(src_slot_.size());
  const size_t r = size_t(std::max<int64_t>(rows_, 1));
  a1_ = aligned_array<uint8_t>(r * size_t(in.hidden));
  a1_sf_ = aligned_array<int32_t>(r * size_t(in.hidden / 128));
  a2_ = aligned_array<uint8_t>(r * size_t(in.inter));
  a2_sf_ = aligned_array<int32_t>(r * size_t(in.inter / 128));
  d1_ = aligned_array<uint16_t>(r * size_t(2 * in.inter));
  d2_ = aligned_array<uint16_t>(r * size_t(in.hidden));
}

void UnfusedMoe::run(uint16_t* y) {
  const int64_t h = in_.hidden, inter = in_.inter, topk = in_.topk;
  // Dispatch: each expert's rows one after another.
  parallel_for(rows_, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = src_slot_[size_t(r)] / topk;
      std::memcpy(a1_.get() + r * h, in_.x + t * h, size_t(h));
      std::memcpy(a1_sf_.get() + r * (h / 128), in_.x_sf + t * (h / 128), size_t(h / 128 * 4));
    }
  });
  gemm::ContiguousLayout layout;
  layout.grouped_layout = TensorView(ends_.data(), DType::kI32, {in_.experts});
  layout.use_psum_layout = true;
  layout.ensure_zero_padding = false;
  layout.mk_alignment = 1;
  gemm::Recipe recipe;
  recipe.recipe = std::array<int, 3>{1, 1, 32};
  gemm::m_grouped_fp8_fp4_gemm_nt_contiguous(
      {TensorView(a1_.get(), DType::kF8E4M3, {rows_, h}), TensorView(a1_sf_.get(), DType::kI32, {rows_, h / 128})},
      in_.l1, TensorView(d1_.get(), DType::kBF16, {rows_, 2 * inter}), layout, recipe);
  parallel_for(rows_, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      swiglu_fp8_row(d1_.get() + r * 2 * inter, inter, in_.topk_weights[src_slot_[size_t(r)]], a2_.get() + r * inter,
                     reinterpret_cast<uint8_t*>(a2_sf_.get() + r * (inter / 128)));
  });
  gemm::m_grouped_fp8_fp4_gemm_nt_contiguous({TensorView(a2_.get(), DType::kF8E4M3, {rows_, inter}),
                                              TensorView(a2_sf_.get(), DType::kI32, {rows_, inter / 128})},
                                             in_.l2, TensorView(d2_.get(), DType::kBF16, {rows_, h}), layout, recipe);
  // Combine: each token's slots in slot order, fp32, one rounding (the fused layer's reduction kernel).
  const auto& kernels = *static_cast<const cpu::EpKernels*>(cpu::cached_kernel(cpu::Slot::kEp, "bench moe"));
  parallel_for(in_.tokens, [&](int64_t t0, int64_t t1) {
    std::vector<const uint16_t*> rows(static_cast<size_t>(topk));
    for (int64_t t = t0; t < t1; ++t) {
      int used = 0;
      for (int64_t k = 0; k < topk; ++k) {
        const int64_t r = row_of_slot_[size_t(t * topk + k)];
        if (r >= 0) rows[size_t(used++)] = d2_.get() + r * h;
      }
      kernels.reduce_bf16(y + t * h, rows.data(), used, nullptr, nullptr, h, 0);
    }
  });
}

}  // namespace tessera::bench
