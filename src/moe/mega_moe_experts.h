// One work item of a Mega MoE call: a block of the tokens one local expert received. It gathers the
// block's activations from the source ranks' buffers, runs GEMM 1, the activation, GEMM 2 (tessera's
// own GEMMs, whatever kernel the registry picks) and writes each output row into the source rank's
// combine area at (token, slot).
#pragma once

#include <cstdint>
#include <optional>

#include "moe/mega_moe_routing.h"
#include "tessera/gemm.h"
#include "tessera/mega_moe.h"

namespace tessera::mega_moe::detail {

// Every local expert's weights (3-D views [E_local, N, K]); scales undefined for bf16.
struct ExpertWeights {
  gemm::ScaledTensor l1, l2;
};

struct BlockJob {
  int expert;         // local expert index
  const Slot* slots;  // the block's tokens
  int64_t num_slots;
};

void run_expert_block(const SymmBuffer& buffer, const ExpertWeights& weights, const BlockJob& job,
                      std::optional<float> clamp);

}  // namespace tessera::mega_moe::detail
