// tessera/mega_moe.h - DeepGEMM's Mega MoE on CPUs: one call runs a whole expert-parallel MoE layer
// (dispatch, expert GEMM 1, SwiGLU, re-quantisation, expert GEMM 2, weighted combine) across the
// ranks of an ep::Group (DeepGEMM's API, docs/gemm.md "Mega MoE").
//
// Every rank owns one SymmBuffer; the buffers of the ranks of one node live in POSIX shared memory
// that every rank maps, so ranks read their experts' tokens straight from the peers' buffers and
// write the expert outputs straight into the source rank's combine area. Groups spanning several
// nodes (MPI between hosts) are not implemented yet.
//
// Results: each token's top-k slots are summed in slot order in fp32 and rounded once to bf16, so y
// is bitwise identical for any thread count. Invalid arguments throw tessera::Error naming the
// function, the argument and the rule, on the calling rank and before it waits for its peers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tessera/core/tensor.h"
#include "tessera/gemm.h"

namespace tessera::ep {
class Group;
}

namespace tessera::mega_moe {

enum class MmaType { kFp8xFp4, kBf16xBf16 };

// "fp8xfp4" or "bf16xbf16"; anything else throws naming `fn` and the argument 'mma_type'.
MmaType parse_mma_type(const char* fn, const std::string& mma_type);

struct BufferShape {
  int num_ranks = 1;
  int num_experts = 0;
  int num_max_tokens_per_rank = 0;
  int num_topk = 0;
  int hidden = 0;
  int intermediate_hidden = 0;
  MmaType mma_type = MmaType::kFp8xFp4;
};

// Byte offsets of the regions of one rank's buffer (each 64-byte aligned):
//   x            [num_max_tokens, hidden]        float8_e4m3fn (fp8xfp4) or bf16
//   x_sf         [num_max_tokens, hidden / 128]  int32, four UE8M0 exponents per int (fp8xfp4 only)
//   topk_idx     [num_max_tokens, num_topk]      int64, -1 = slot unused
//   topk_weights [num_max_tokens, num_topk]      float32
//   combine      [num_max_tokens, num_topk, hidden] bf16: expert outputs written by the experts' ranks
// The header holds the rank's token count of the current call.
struct BufferLayout {
  size_t header = 0, x = 0, x_sf = 0, topk_idx = 0, topk_weights = 0, combine = 0, total = 0;
};

// Validates the shape (throws naming `fn` and the argument) and computes the layout.
BufferLayout buffer_layout(const char* fn, const BufferShape& shape);

class SymmBuffer {
 public:
  // Collective over `group`: every rank passes the same shape. group == nullptr: one rank, no MPI,
  // private memory.
  static std::shared_ptr<SymmBuffer> create(std::shared_ptr<ep::Group> group, BufferShape shape);
  ~SymmBuffer();
  SymmBuffer(const SymmBuffer&) = delete;
  SymmBuffer& operator=(const SymmBuffer&) = delete;

  const BufferShape& shape() const { return shape_; }
  const BufferLayout& layout() const { return layout_; }
  int rank() const { return rank_; }
  char* data() const { return rank_data(rank_); }  // this rank's buffer
  char* rank_data(int rank) const;                 // any rank of the group (same node)
  size_t bytes() const { return layout_.total; }
  // Blocks until every rank arrived (no-op for one rank).
  void barrier() const;

  struct Impl;

 private:
  SymmBuffer(std::shared_ptr<ep::Group> group, BufferShape shape, BufferLayout layout);
  std::shared_ptr<ep::Group> group_;
  BufferShape shape_;
  BufferLayout layout_;
  int rank_ = 0;
  std::unique_ptr<Impl> impl_;
};

struct Options {
  std::string activation = "swiglu";       // the only activation
  std::optional<float> activation_clamp;   // gate <= clamp, -clamp <= up <= clamp (bf16); none = no clamp
  bool fast_math = true;                   // accepted; the CPU always uses exact expf and division
  std::array<int, 3> recipe = {1, 1, 32};  // fp8xfp4 only: (1, 1, 32) is the one recipe
};

// y [num_tokens, hidden] bf16 (num_tokens <= num_max_tokens_per_rank): this rank's tokens are the
// first num_tokens rows of the buffer's x / x_sf / topk_idx / topk_weights.
// l1 = (data [E_local, 2 I, hidden / 2] packed FP4 (int8/uint8), sf [E_local, 2 I, hidden / 128]
//       int32 UE8M0 or float32 [E_local, 2 I, hidden / 32]); rows [0, I) are the gate, [I, 2 I) the up
//       projection (the layout transform_weights_for_mega_moe returns on CPU).
// l2 = (data [E_local, hidden, I / 2], sf [E_local, hidden, I / 128] int32 or [.., I / 32] float32).
// stats: int32 [E_local] or nullptr; stats[e] += tokens-slots routed to local expert e by all ranks.
void fp8_fp4_mega_moe(const TensorView& y, const gemm::ScaledTensor& l1, const gemm::ScaledTensor& l2,
                      const TensorView* stats, SymmBuffer& buffer, const Options& options = {});
// bf16 weights l1 [E_local, 2 I, hidden], l2 [E_local, hidden, I]; x is bf16.
void bf16_mega_moe(const TensorView& y, const TensorView& l1, const TensorView& l2, const TensorView* stats,
                   SymmBuffer& buffer, const Options& options = {});

}  // namespace tessera::mega_moe
