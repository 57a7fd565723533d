// The unfused MoE layer the Mega MoE bench compares with: gather each expert's rows into one
// contiguous (psum) layout, tessera's M-grouped FP8 x FP4 GEMM, SwiGLU with the top-k weight and FP8
// re-quantisation in a plain loop, the second grouped GEMM, then each token's slots summed.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/memory.h"
#include "tessera/core/tensor.h"
#include "tessera/gemm.h"

namespace tessera::bench {

struct MoeInputs {
  int64_t tokens = 0, hidden = 0, inter = 0, experts = 0, topk = 0;
  const uint8_t* x = nullptr;         // e4m3 [tokens, hidden]
  const int32_t* x_sf = nullptr;      // packed UE8M0 [tokens, hidden / 128]
  const int64_t* topk_idx = nullptr;  // [tokens, topk]
  const float* topk_weights = nullptr;
  gemm::ScaledTensor l1, l2;  // [E, 2I, H/2] / [E, H, I/2] packed FP4 with packed scales
};

class UnfusedMoe {
 public:
  explicit UnfusedMoe(const MoeInputs& in);
  void run(uint16_t* y);  // y bf16 [tokens, hidden]
  // Later runs read these weights (a copy of the same shape: the bench rotates copies for decode).
  void use_weights(const gemm::ScaledTensor& l1, const gemm::ScaledTensor& l2) {
    in_.l1 = l1;
    in_.l2 = l2;
  }

 private:
  MoeInputs in_;
  int64_t rows_ = 0;
  std::vector<int32_t> ends_;         // psum of rows per expert
  std::vector<int64_t> src_slot_;     // row -> token * topk + slot
  std::vector<int64_t> row_of_slot_;  // token * topk + slot -> row, or -1
  AlignedPtr<uint8_t> a1_, a2_;
  AlignedPtr<int32_t> a1_sf_, a2_sf_;
  AlignedPtr<uint16_t> d1_, d2_;
};

}  // namespace tessera::bench
