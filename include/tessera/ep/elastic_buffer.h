// tessera/ep/elastic_buffer.h - DeepEP's ElasticBuffer (v2): expert-parallel dispatch and combine
// between CPU ranks (DeepEP's API; the contract is in docs/ep.md).
//
// Every rank owns a receive region in POSIX shared memory with one fixed slot area per source rank;
// senders on the same node write each token once, straight into the receiver's slots, and publish
// with a release store. Ranks on other nodes are reached over MPI, in direct mode (one message per
// destination rank) or hybrid mode (one crossing per destination node, forwarded inside the node by
// the rank with the sender's local index; combine reduces at that forwarder). Hybrid mode is used when
// allow_hybrid_mode and allow_multiple_reduction are set, there is more than one node and all nodes
// have the same number of ranks; else direct mode.
//
// dispatch/combine/barrier are collective: every rank of the group calls them in the same order.
// Every wait is bounded by num_cpu_timeout_secs; a dead or stuck peer raises Error(kRuntime) naming the
// peer rank and the operation on every surviving rank (ranks on this host learn of another rank's
// failure at once; ranks on other hosts by their own timeout), and the buffer refuses further use.
//
// Results are deterministic in every mode (the `deterministic` flag is accepted; rows are always
// ordered by source rank, then source token index), bitwise identical for any thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/ep/group.h"
#include "tessera/ep/types.h"

namespace tessera::ep {

struct ElasticBufferConfig {
  std::optional<int64_t> num_bytes;  // receive region bytes per rank (a multiple of 2 MiB), or from:
  int64_t num_cpu_bytes = 0;         // accepted for compatibility (Engram storage is not implemented)
  int num_max_tokens_per_rank = 0;
  int hidden = 0;
  int num_topk = 0;
  bool use_fp8_dispatch = false;
  bool deterministic = false;
  bool allow_hybrid_mode = true;
  bool allow_multiple_reduction = true;
  bool prefer_overlap_with_compute = true;
  int sl_idx = 3;             // RDMA service level: no effect on CPUs
  int num_allocated_qps = 0;  // RDMA queue pairs: no effect on CPUs
  double num_cpu_timeout_secs = 300;
  double num_gpu_timeout_secs = 100;  // no effect on CPUs
  bool explicitly_destroy = false;
};

namespace detail {
struct HandleInternal;
struct ElasticState;
}  // namespace detail

// What dispatch returns for combine and cached dispatch (DeepEP's EPHandle). Arrays are row-major.
struct EpHandle {
  bool do_expand = false;
  int num_experts = 0, expert_alignment = 1, num_max_tokens_per_rank = 0, num_topk = 0, num_sms = 0;
  int64_t num_tokens = 0;           // T of this rank's input
  std::vector<int64_t> topk_idx;    // [T, K] copy of the dispatched experts
  int64_t num_recv_tokens = 0;      // rows of the non-expanded layout
  int64_t num_expanded_tokens = 0;  // rows of the expanded layout, padding included (non-expand: = num_recv_tokens)
  std::vector<int> num_recv_tokens_per_expert_list;            // [E_local] counts aligned to expert_alignment
  std::vector<int32_t> psum_num_recv_tokens_per_scaleup_rank;  // [num_ranks] inclusive prefix of rows per source rank
  std::vector<int32_t> psum_num_recv_tokens_per_expert;        // [E_local] see docs/ep.md
  std::vector<int32_t> num_unaligned_recv_tokens_per_expert;   // [E_local]
  std::vector<int32_t> recv_src_metadata;                      // [num_recv_tokens, K + 2]
  std::vector<int32_t> dst_buffer_slot_idx;                    // [T, K] slot of the token at the lane's rank, -1
  std::shared_ptr<const detail::HandleInternal> internal;
};

struct DispatchArgs {
  TensorView x;                                   // bf16 or float8_e4m3fn [T, hidden], stride(-1) == 1
  TensorView sf;                                  // FP8 only: [T, packs] 4-byte items (float32 or int32), any strides
  TensorView topk_idx;                            // [T, K] int64 (-1 = none); must be undefined with a cached handle
  TensorView topk_weights;                        // [T, K] float32, optional
  TensorView cumulative_local_expert_recv_stats;  // [E_local] int32, optional, += unaligned counts
  int num_experts = 0;                            // 0: from the handle
  int num_max_tokens_per_rank = 0;                // 0: the buffer's (or the handle's)
  int expert_alignment = 0;                       // 0: 1 (or the handle's)
  std::shared_ptr<const EpHandle> handle;         // cached dispatch: same routing, same row order
  bool do_handle_copy = true;
  std::optional<bool> do_cpu_sync;  // default: true unless a handle is given
  bool do_expand = false;
  bool do_zero_padding = false;  // padding rows are always zero (documented choice)
  bool use_tma_aligned_col_major_sf = false;
  bool async = false;  // return before the receive side finished; see Event
  int num_sms = 0;     // worker threads (0: automatic)
};

struct DispatchResult {
  OwnedTensor recv_x, recv_sf;       // recv_sf only for FP8 input
  OwnedTensor recv_topk_idx;         // [N, K] int64 local expert or -1 (non-expand only)
  OwnedTensor recv_topk_weights;     // non-expand [N, K]; expand [M] (only with topk_weights)
  std::shared_ptr<EpHandle> handle;  // for a cached dispatch: the given handle
  Event event;
};

struct CombineArgs {
  TensorView x;             // bf16 [rows, hidden]: the dispatch layout (non-expand or expand)
  TensorView topk_weights;  // non-expand [rows, K] / expand [rows] float32, optional
  TensorView bias0, bias1;  // bf16 [T, hidden], optional
  bool async = false;
  int num_sms = 0;
};

struct CombineResult {
  OwnedTensor combined_x;             // bf16 [T, hidden]
  OwnedTensor combined_topk_weights;  // float32 [T, K] when topk_weights was given
  Event event;
};

// engram_fetch's result (experimental Engram storage).
struct EngramFetchResult {
  OwnedTensor data;  // [T, P * hidden], the storage's dtype
  OwnedTensor sf;    // [T, P * packs] when scale packs were written, else undefined
  Event event;       // the data is complete on return; wait() is there for DeepEP's hook
};

// all_gather's result (experimental AGRS sessions).
struct AllGatherResult {
  std::vector<OwnedTensor> gathered;  // per input: [num_ranks, *input shape], valid until the session ends
  Event event;                        // wait(): every rank's tensor has arrived
};

class ElasticBuffer {
 public:
  // Collective. Throws Error(kInvalidArgument) for bad sizes and Error(kRuntime) when shared memory
  // cannot be created or a rank does not join within num_cpu_timeout_secs.
  ElasticBuffer(std::shared_ptr<Group> group, const ElasticBufferConfig& config);
  ~ElasticBuffer();
  ElasticBuffer(const ElasticBuffer&) = delete;
  ElasticBuffer& operator=(const ElasticBuffer&) = delete;

  // Bytes of the receive region for these MoE settings, a multiple of 2 MiB.
  static int64_t get_buffer_size_hint(const Group& group, int num_max_tokens_per_rank, int hidden, int num_topk = 0,
                                      bool use_fp8_dispatch = false, bool allow_hybrid_mode = true,
                                      bool allow_multiple_reduction = true);

  DispatchResult dispatch(const DispatchArgs& args);
  CombineResult combine(const CombineArgs& args, const EpHandle& handle);
  // tessera extension: a bf16 [rows, hidden] tensor for the expert outputs of `handle`'s dispatch
  // (rows = num_recv_tokens; hidden 0 = the dispatch's). For the non-expanded layout on one node it
  // lives in this buffer's shared memory, so combine(x = this tensor) lets the source ranks read the
  // rows where they are instead of receiving a copy (recv_x of a bf16 dispatch works the same way).
  // Otherwise (expanded layout, several nodes, arena full) ordinary memory.
  OwnedTensor get_combine_input(const EpHandle& handle, int64_t hidden = 0);
  void barrier();

  // ---- Experimental DeepEP v2 features (see docs/ep.md) ----
  // Pipeline-parallel FIFO to the previous / next rank of the ring. pp_set_config is collective (and
  // flushes earlier operations); pp_send returns once t may be reused and blocks while
  // num_max_inflight_tensors of its tensors to that rank are unconsumed; pp_recv blocks until the
  // next tensor from src arrived (its byte size must equal t's).
  static int64_t get_pp_buffer_size_hint(int64_t num_max_tensor_bytes, int num_max_inflight_tensors);
  void pp_set_config(int64_t num_max_tensor_bytes, int num_max_inflight_tensors);
  void pp_send(const TensorView& t, int dst_rank_idx);
  void pp_recv(const TensorView& t, int src_rank_idx);
  // All-gather sessions: agrs_set_config is collective; between create_agrs_session and
  // destroy_agrs_session every rank makes the same all_gather calls (tensors of the same byte sizes,
  // each a positive multiple of 32 bytes, gathered results R times that in all <=
  // num_max_session_bytes). agrs_get_inplace_tensor gives this rank's slots of the next all_gather
  // (uint8 [nbytes] each): gathering them skips this rank's own copy.
  static int64_t get_agrs_buffer_size_hint(const Group& group, int64_t num_max_session_bytes);
  void agrs_set_config(int64_t num_max_session_bytes, int num_max_all_gathers_per_session);
  void create_agrs_session();
  void destroy_agrs_session();
  std::vector<OwnedTensor> agrs_get_inplace_tensor(const std::vector<int64_t>& nbytes);
  AllGatherResult all_gather(const std::vector<TensorView>& tensors);

  // Engram storage: a table of num_ranks x E entries, global entry g held by rank g / E.
  // engram_write is collective (every rank writes [E, hidden] of the same dtype, optional [E, packs]
  // 4-byte scale packs); engram_fetch(indices int32 [T] or [T, P]) reads entries from any rank of this
  // node. Across nodes: Error(kNotImplemented).
  static int64_t get_engram_storage_size_hint(int64_t num_entries, int64_t hidden, int64_t num_max_tokens_per_rank,
                                              DType dtype = DType::kBF16);
  void engram_write(const TensorView& storage, const TensorView& sf = TensorView());
  EngramFetchResult engram_fetch(const TensorView& indices);

  // Releases the shared memory now (only with explicitly_destroy); later calls throw.
  void destroy();

  const Group& group() const;
  int rank_idx() const;
  int num_ranks() const;
  int64_t num_bytes() const;
  int num_max_tokens_per_rank() const;
  int num_scaleout_ranks() const;
  int num_scaleup_ranks() const;
  int scaleout_rank_idx() const;
  int scaleup_rank_idx() const;
  bool hybrid_mode() const;
  bool explicitly_destroy() const;
  // Worker threads a dispatch/combine uses on this rank (DeepEP: SMs).
  int get_theoretical_num_sms(int num_experts, int num_topk) const;

 private:
  std::unique_ptr<detail::ElasticState> st_;
};

}  // namespace tessera::ep
