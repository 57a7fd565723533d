// tessera/ep/legacy_buffer.h - DeepEP's legacy Buffer (v1): dispatch layout, normal dispatch/combine
// and the low-latency (decode) dispatch/combine (docs/ep.md).
//
// Same transport as ElasticBuffer (tessera/ep/elastic_buffer.h): shared-memory slots inside a node,
// MPI between nodes, always in direct mode (one message per destination rank). The receive region of
// num_nvl_bytes + num_rdma_bytes per rank is split into one slot area per source rank; an operation
// whose tokens do not fit raises an error that names the size it needs.
//
// Normal mode: rows are grouped by source rank, then ascending source token; the weights of other
// ranks' experts are 0; combine is an unweighted fp32 sum: bias0, bias1, then source ranks
// ascending, one bf16 rounding; combined weights are the fp32 sum of the returned weights in the
// same order.
// Low latency: tokens go to each rank holding one of their experts (once per rank, not once per
// expert: the receiver fans out), land in a per-expert masked layout [E_local, R * max, H]; combine
// returns sum_k w[t,k] * y_k in fp32 (ascending k, -1 skipped; a multiply then an add), rounded once.
// The low-latency outputs live in two buffers owned by the Buffer that alternate between calls: a
// result stays valid until the second-next low_latency_dispatch (as in DeepEP).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/ep/group.h"
#include "tessera/ep/types.h"

namespace tessera::ep {

struct BufferConfig {
  int64_t num_nvl_bytes = 0;
  int64_t num_rdma_bytes = 0;
  bool low_latency_mode = false;
  int num_qps_per_rank = 24;  // RDMA queue pairs: no effect on CPUs
  bool explicitly_destroy = false;
  bool enable_shrink = false;         // rank masking is not implemented: must stay false
  double num_cpu_timeout_secs = 300;  // tessera extension (DeepEP v1 has no CPU timeout argument)
};

struct DispatchLayout {
  OwnedTensor num_tokens_per_rank;       // [R] int32
  OwnedTensor num_tokens_per_rdma_rank;  // [num_nodes] int32; undefined with one node
  OwnedTensor num_tokens_per_expert;     // [E] int32
  OwnedTensor is_token_in_rank;          // [T, R] bool
};

namespace detail {
struct LegacyState;
struct LegacyHandleData;
struct LowLatencyHandleData;
}  // namespace detail

// Opaque handles (DeepEP passes tuples; code only hands them back).
struct LegacyHandle {
  int64_t num_recv_tokens = 0;
  std::vector<int32_t> rank_prefix_matrix;  // [R * R] row-major: tokens ranks 0..i send to rank j
  std::shared_ptr<const detail::LegacyHandleData> data;
};
struct LowLatencyHandle {
  int num_max_dispatch_tokens_per_rank = 0, hidden = 0, num_experts = 0;
  OwnedTensor src_info;      // [E_local, R * max] int32: source token index of each valid row
  OwnedTensor layout_range;  // [E_local, R] int64: (first row << 32) | count, per source rank
  std::shared_ptr<const detail::LowLatencyHandleData> data;
};

struct LegacyDispatchArgs {
  TensorView x, sf;  // bf16 [T, H], or FP8 [T, H] with sf [T, packs] (4-byte items, any strides)
  std::shared_ptr<const LegacyHandle> handle;  // cached dispatch: only x (and sf) are given
  TensorView num_tokens_per_rank, num_tokens_per_rdma_rank, is_token_in_rank, num_tokens_per_expert;
  TensorView topk_idx, topk_weights;  // optional
  int expert_alignment = 1;
  int64_t num_worst_tokens = 0;  // > 0: outputs have this many rows (valid ones first), no list
  bool async = false;
};

struct LegacyDispatchResult {
  OwnedTensor recv_x, recv_sf, recv_topk_idx, recv_topk_weights;
  std::vector<int> num_recv_tokens_per_expert_list;  // aligned counts per local expert
  std::shared_ptr<LegacyHandle> handle;
  Event event;
};

struct LegacyCombineArgs {
  TensorView x;             // bf16 [N, H] in the dispatch's row order
  TensorView topk_weights;  // [N, K] float32, optional
  TensorView bias0, bias1;  // bf16 [T, H], optional
  bool async = false;
};

struct LegacyCombineResult {
  OwnedTensor combined_x, combined_topk_weights;
  Event event;
};

struct LowLatencyDispatchArgs {
  TensorView x;         // bf16 [T, H]
  TensorView topk_idx;  // [T, K] int64
  int num_max_dispatch_tokens_per_rank = 0;
  int num_experts = 0;
  TensorView cumulative_local_expert_recv_stats;  // [E_local] int32, optional
  bool use_fp8 = true, round_scale = false, use_ue8m0 = false;
  bool async = false, return_recv_hook = false;
};

struct LowLatencyDispatchResult {
  OwnedTensor recv_x;       // [E_local, R * max, H] float8_e4m3fn or bf16 (views of the Buffer's storage)
  OwnedTensor recv_scales;  // FP8: [E_local, R * max, H / 128] float32, or [.., H / 512] int32 (UE8M0 x4),
                            // last two dimensions column-major
  OwnedTensor recv_count;   // [E_local] int32
  std::shared_ptr<LowLatencyHandle> handle;
  Event event;  // async or hook: waiting receives and unpacks
};

struct LowLatencyCombineArgs {
  TensorView x;             // bf16 [E_local, R * max, H], rows with stride(-1) == 1
  TensorView topk_idx;      // the dispatch's [T, K]
  TensorView topk_weights;  // [T, K] float32
  TensorView out;           // optional bf16 [T, H] destination
  bool async = false, return_recv_hook = false;
};

struct LowLatencyCombineResult {
  OwnedTensor combined_x;  // [T, H] bf16 (`out` itself when given)
  Event event;
};

class Buffer {
 public:
  Buffer(std::shared_ptr<Group> group, const BufferConfig& config);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Receive region bytes for low-latency use (assumes top-k <= 9; calls check what they need).
  static int64_t get_low_latency_rdma_size_hint(int num_max_dispatch_tokens_per_rank, int hidden, int num_ranks,
                                                int num_experts);

  DispatchLayout get_dispatch_layout(const TensorView& topk_idx, int num_experts);
  LegacyDispatchResult dispatch(const LegacyDispatchArgs& args);
  LegacyCombineResult combine(const LegacyCombineArgs& args, const LegacyHandle& handle);
  LowLatencyDispatchResult low_latency_dispatch(const LowLatencyDispatchArgs& args);
  LowLatencyCombineResult low_latency_combine(const LowLatencyCombineArgs& args, const LowLatencyHandle& handle);
  void barrier();
  void destroy();

  const Group& group() const;
  int rank() const;
  int group_size() const;
  int num_rdma_ranks() const;  // nodes
  int num_nvl_ranks() const;   // ranks per node (this node)
  bool low_latency_mode() const;
  bool explicitly_destroy() const;

 private:
  std::unique_ptr<detail::LegacyState> st_;
};

}  // namespace tessera::ep
